//! The tools the host can run: built-in components carried in the binary and extra
//! components loaded from files, their descriptors as the host sees them, and observations.

pub mod builtin;
pub mod image;
pub mod observation;
pub mod output_schema;
pub mod registry;

pub use builtin::Builtin;
pub use image::Image;
pub use observation::{Observation, Status, Total};
pub use registry::{Ceiling, Registry, Risk, ToolInfo};
