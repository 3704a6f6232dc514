//! The tools the host can run: built-in components carried in the binary and extra
//! components loaded from files, installed plugins, their descriptors as the host sees them,
//! and observations.

pub mod builtin;
pub mod descriptor;
pub mod image;
pub mod input_schema;
pub mod observation;
pub mod output_schema;
pub mod plugin_load;
pub mod registry;

pub use builtin::Builtin;
pub use image::Image;
pub use observation::{Observation, Status, Total};
pub use plugin_load::PendingInstall;
pub use registry::{Ceiling, Registry, Risk, ToolInfo};
