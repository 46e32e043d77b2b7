//! The bottom layer: what every benchmark needs and nothing above it. The settings and the
//! options they come from (`args`), the tuples sent (`payload`), how a sender sends (`load`)
//! and a receiver records (`record`), the arithmetic of the figures (`stats`), where they were
//! measured (`machine`), a transport benchmark's result (`report`), the figures that
//! cannot be true as printed (`warnings`) and hosts made of network
//! namespaces (`netns`, public: the CLI's tests use them too). It uses no other layer.

pub(crate) mod args;
pub(crate) mod load;
pub(crate) mod machine;
pub mod netns;
pub(crate) mod payload;
pub(crate) mod record;
pub(crate) mod report;
pub(crate) mod stats;
pub(crate) mod warnings;
