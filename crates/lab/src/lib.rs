//! The namespace lab. Work in progress.
