//! Software RSS (XDP). Work in progress.
