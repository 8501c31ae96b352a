//! Experiments. Work in progress.
