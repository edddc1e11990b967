//! The pipe's end-to-end digest, built from the per-block hashes.
//!
//! Every block travels with the BLAKE3 hash of its payload in its header
//! ([`frame::DataHeader::check`](super::frame::DataHeader)): the sender
//! hashes a block once, where it reads it; the receiver hashes it once,
//! where it reads it off its connection, and compares. The same two hashes
//! make the end-to-end digest, so each side passes over every byte with
//! BLAKE3 exactly once (issue 13: "one hashing pass per side, per-block
//! hashes as the block check, the end-to-end digest over them"):
//!
//! ```text
//! digest = BLAKE3( "braid pipe digest v2"
//!                  || prefix length u64 BE || BLAKE3(prefix)
//!                  || for each block in order: length u32 BE || BLAKE3(block) )
//! ```
//!
//! The prefix is what a resuming receiver already holds (length 0 and the
//! hash of the empty string without `--resume`): both sides hash it as one
//! stream when they resume, so the digest covers the whole file, however
//! the earlier run cut it into blocks. Block lengths are in the digest, so
//! moving bytes across a block boundary changes it.
//!
//! This is a hash list over BLAKE3 (a two-level tree, like BitTorrent's
//! piece hashes): as collision-resistant as BLAKE3 itself, but not the
//! `b3sum` of the stream.

/// Domain separation for the digest.
const DOMAIN: &[u8] = b"braid pipe digest v2";

/// The end-to-end digest, fed block by block in stream order.
#[derive(Debug, Clone)]
pub struct StreamDigest {
    list: blake3::Hasher,
}

impl StreamDigest {
    /// A digest that starts after a prefix of `bytes` bytes whose BLAKE3
    /// hash is `hash` ([`StreamDigest::fresh`] without one).
    pub fn after_prefix(bytes: u64, hash: &blake3::Hash) -> Self {
        let mut list = blake3::Hasher::new();
        list.update(DOMAIN);
        list.update(&bytes.to_be_bytes());
        list.update(hash.as_bytes());
        StreamDigest { list }
    }

    /// A digest of a stream without a prefix.
    pub fn fresh() -> Self {
        Self::after_prefix(0, &blake3::hash(&[]))
    }

    /// Adds the next block: its length and its BLAKE3 hash.
    pub fn add(&mut self, len: u32, hash: &[u8; 32]) {
        self.list.update(&len.to_be_bytes());
        self.list.update(hash);
    }

    /// The digest of everything added so far.
    pub fn finish(&self) -> [u8; 32] {
        *self.list.finalize().as_bytes()
    }
}

/// The hash a block travels with: BLAKE3 of its payload.
pub fn block_hash(data: &[u8]) -> [u8; 32] {
    *blake3::hash(data).as_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest_of(blocks: &[&[u8]]) -> [u8; 32] {
        let mut d = StreamDigest::fresh();
        for b in blocks {
            d.add(b.len() as u32, &block_hash(b));
        }
        d.finish()
    }

    #[test]
    fn the_digest_follows_the_bytes_and_the_block_boundaries() {
        let a = digest_of(&[b"hello ", b"world"]);
        assert_eq!(a, digest_of(&[b"hello ", b"world"]));
        assert_ne!(a, digest_of(&[b"hello ", b"worle"]), "a changed byte");
        assert_ne!(a, digest_of(&[b"hello", b" world"]), "a moved boundary");
        assert_ne!(a, digest_of(&[b"world", b"hello "]), "reordered blocks");
        assert_ne!(a, digest_of(&[b"hello "]), "a missing block");
    }

    #[test]
    fn a_prefix_counts_as_its_own_hash_and_length() {
        let prefix = b"the first part, ";
        let mut d = StreamDigest::after_prefix(prefix.len() as u64, &blake3::hash(prefix));
        d.add(4, &block_hash(b"rest"));
        let whole = d.finish();
        // The prefix is hashed as one stream: the same digest whatever the
        // earlier run's blocks were, but not the digest without a prefix.
        let mut fresh = StreamDigest::fresh();
        fresh.add(prefix.len() as u32, &block_hash(prefix));
        fresh.add(4, &block_hash(b"rest"));
        assert_ne!(whole, fresh.finish());
        let mut other = StreamDigest::after_prefix(15, &blake3::hash(&prefix[..15]));
        other.add(4, &block_hash(b"rest"));
        assert_ne!(whole, other.finish());
    }
}
