//! Being built: see the issue that owns this module.
