//! The outputs, one file per format: each formats the analysis's report (or a gate's
//! result) and computes no figure of its own.

pub mod ci_output;
pub mod html;
pub mod json;
pub mod perfetto;
pub mod text;
