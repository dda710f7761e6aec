//! The paper's tables from finished runs.
//!
//! - [`paper`]: the numbers the paper reports.
//! - [`tables`]: tables 1 and 2 from a folder of runs, beside the paper's.

pub mod paper;
pub mod tables;
