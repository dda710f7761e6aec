//! The paper's tables and figures from finished runs.
//!
//! - [`paper`]: the numbers the paper reports.
//! - [`tables`]: tables 1 and 2 from a folder of runs, beside the paper's.
//! - [`activations`]: test lines of one shape and a layer's outputs on them.
//! - [`correlation`]: the correlation matrix of those outputs and its blockiness score.
//! - [`heatmap`], [`curves`]: PNG drawing of correlation matrices and training curves.
//! - [`figures`]: the paper's figures 3-5 from a sweep, `scores.csv`, and every run's curves.
//! - [`draw`]: the font, colours and error type the figures share.

pub mod activations;
pub mod correlation;
pub mod curves;
pub mod draw;
pub mod figures;
pub mod heatmap;
pub mod paper;
pub mod tables;
