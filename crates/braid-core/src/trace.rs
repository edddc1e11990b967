//! Bandwidth trace parsers. Being built; see issue 2.
