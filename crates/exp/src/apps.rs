//! `steer exp apps`: real servers (nginx, redis, memcached), unmodified,
//! on Linux TCP and on each engine of the data path, their clients on
//! Linux TCP in the lab's other namespace (issue 24).

pub mod client;
pub mod http;
pub mod memcached;
pub mod redis;
