//! `read`: a file from the workspace, shown to the model (the logic is `toolgate-reading`'s).
//!
//! This component carries no image or PDF decoder: for an image or a PDF it answers
//! [`toolgate_reading::HAND_OFF`] and the host runs the same call in `read-media`. So the
//! component every text read needs is small, and its first use compiles in a fraction of a
//! second instead of the seconds the decoders take.

use toolgate_guest::{Context, Descriptor, Output, Tool, ToolError, Value};
use toolgate_reading::{descriptor, run, HandOff, Report};

struct Read;

impl Tool for Read {
    fn describe() -> Descriptor {
        descriptor()
    }

    fn call(input: Value, cx: &Context) -> Result<Output, ToolError> {
        run(&input, cx, &HandOff).map(Report::into_output)
    }
}

toolgate_guest::register_tool!(Read);
