//! The pipe's end-to-end digest, built from the per-block checks.
//!
//! Every block travels with a hash of its payload in its header
//! ([`frame::DataHeader::check`](super::frame::DataHeader)): the sender
//! hashes a block once, as it reads it; the receiver hashes it once, as it
//! reads it off its connection, and compares. The same two hashes make the
//! end-to-end digest, so each side passes over every byte with one hash
//! exactly once (issue 13: "one hashing pass per side, per-block hashes as
//! the block check, the end-to-end digest over them"):
//!
//! ```text
//! digest = BLAKE3( "braid pipe digest v2"
//!                  || prefix length u64 BE || BLAKE3(prefix)
//!                  || for each block in order: length u32 BE || check(block) )
//! ```
//!
//! The check ([`CheckKind`]) is BLAKE3 where it must stand against an
//! attacker or nothing else does: `--no-encrypt`, whose clear payloads it
//! authenticates, and `--insecure`. Where records are encrypted, AES-GCM
//! already authenticates every byte on the wire, and the check is
//! XXH3-128 (several times faster; docs/BENCHMARKS.md): it guards what the
//! AEAD cannot see, the bytes inside each endpoint between the read and
//! the seal and between the open and the hash, against accidents (a bit
//! flipped in memory, a bug), not against attackers. Both sides use the
//! kind of the connection mode the handshake fixed, so their digests
//! compare like with like.
//!
//! The prefix is what a resuming receiver already holds (length 0 and the
//! hash of the empty string without `--resume`): both sides hash it with
//! BLAKE3 as one stream when they resume, so the digest covers the whole
//! file, however the earlier run cut it into blocks. Block lengths are in
//! the digest, so moving bytes across a block boundary changes it.
//!
//! With BLAKE3 checks this is a hash list over BLAKE3 (a two-level tree,
//! like BitTorrent's piece hashes): as collision-resistant as BLAKE3
//! itself, but not the `b3sum` of the stream. With XXH3 checks it detects
//! an accidental change with probability about 1 − 2^−128 per block.

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

    /// Adds the next block: its length and its check.
    pub fn add(&mut self, len: u32, hash: &[u8; 32]) {
        self.list.update(&len.to_be_bytes());
        self.list.update(hash);
    }

    /// The digest of everything added so far.
    pub fn finish(&self) -> [u8; 32] {
        *self.list.finalize().as_bytes()
    }
}

/// BLAKE3 of `data`: the check of an END frame's payload, and of a
/// block's with [`CheckKind::Blake3`].
pub fn block_hash(data: &[u8]) -> [u8; 32] {
    *blake3::hash(data).as_bytes()
}

/// Bytes hashed at a time while a block arrives (read from the input, or
/// off a connection): whole multiples of 64 KiB, the rest at the end. A
/// power of two of BLAKE3's 1 KiB chunks, so its SIMD paths stay wide
/// wherever reads end; small enough that what a read brought is still in
/// the cache.
pub const HASH_STEP: usize = 64 << 10;

/// Which hash a block's check is (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckKind {
    /// BLAKE3 (`--no-encrypt`, `--insecure`).
    Blake3,
    /// XXH3-128, zero-padded to 32 bytes (encrypted records).
    Xxh3,
}

impl CheckKind {
    /// The check of a connection whose records are encrypted or not.
    pub fn for_records(encrypted: bool) -> Self {
        if encrypted {
            CheckKind::Xxh3
        } else {
            CheckKind::Blake3
        }
    }

    /// A hasher for one block, fed in pieces as the block arrives (each
    /// piece while it is still in the cache).
    pub fn hasher(self) -> BlockHasher {
        match self {
            CheckKind::Blake3 => BlockHasher::Blake3(Box::default()),
            CheckKind::Xxh3 => BlockHasher::Xxh3(Box::default()),
        }
    }

    /// The check of a whole block at once.
    pub fn hash(self, data: &[u8]) -> [u8; 32] {
        let mut h = self.hasher();
        h.update(data);
        h.finish()
    }
}

/// One block's check, computed piece by piece ([`CheckKind::hasher`]).
pub enum BlockHasher {
    /// BLAKE3 (boxed, as is the other: states of 1.9 KB and 0.4 KB, one
    /// per block).
    Blake3(Box<blake3::Hasher>),
    /// XXH3-128.
    Xxh3(Box<twox_hash::XxHash3_128>),
}

impl std::fmt::Debug for BlockHasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BlockHasher::Blake3(_) => "BlockHasher::Blake3",
            BlockHasher::Xxh3(_) => "BlockHasher::Xxh3",
        })
    }
}

impl BlockHasher {
    /// Adds the block's next bytes.
    pub fn update(&mut self, piece: &[u8]) {
        match self {
            BlockHasher::Blake3(h) => {
                h.update(piece);
            }
            BlockHasher::Xxh3(h) => h.write(piece),
        }
    }

    /// Adds what a block has gained since `*hashed`: of `block` (the
    /// bytes it has so far), the whole [`HASH_STEP`]s after `*hashed`, or
    /// all of it when `last`; moves `*hashed` past what it added. Called
    /// after every read, so each piece is hashed while it is cached.
    pub fn update_steps(&mut self, block: &[u8], hashed: &mut usize, last: bool) {
        let upto = if last {
            block.len()
        } else {
            *hashed + (block.len() - *hashed) / HASH_STEP * HASH_STEP
        };
        self.update(&block[*hashed..upto]);
        *hashed = upto;
    }

    /// The check of everything added.
    pub fn finish(&self) -> [u8; 32] {
        match self {
            BlockHasher::Blake3(h) => *h.finalize().as_bytes(),
            BlockHasher::Xxh3(h) => {
                let mut c = [0u8; 32];
                c[..16].copy_from_slice(&h.finish_128().to_be_bytes());
                c
            }
        }
    }
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
    fn checks_fed_in_pieces_equal_the_whole_and_differ_by_kind() {
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 + i / 255) as u8).collect();
        for kind in [CheckKind::Blake3, CheckKind::Xxh3] {
            let whole = kind.hash(&data);
            for piece in [1, 240, 4096, 65_537, 300_000] {
                let mut h = kind.hasher();
                data.chunks(piece).for_each(|p| h.update(p));
                assert_eq!(h.finish(), whole, "{kind:?} in pieces of {piece}");
                // As a block grows read by read, in whole steps.
                let (mut h, mut hashed) = (kind.hasher(), 0);
                for end in (piece..data.len()).step_by(piece) {
                    h.update_steps(&data[..end], &mut hashed, false);
                    assert_eq!(hashed % HASH_STEP, 0, "only whole steps before the end");
                }
                h.update_steps(&data, &mut hashed, true);
                assert_eq!(h.finish(), whole, "{kind:?} in steps, reads of {piece}");
            }
            let mut flipped = data.clone();
            flipped[123_456] ^= 4;
            assert_ne!(kind.hash(&flipped), whole, "{kind:?} sees a flipped bit");
        }
        assert_eq!(CheckKind::Blake3.hash(&data), block_hash(&data));
        assert_eq!(
            CheckKind::Xxh3.hash(&data)[..16],
            twox_hash::XxHash3_128::oneshot(&data).to_be_bytes()
        );
        assert_eq!(CheckKind::Xxh3.hash(&data)[16..], [0; 16]);
        assert_eq!(CheckKind::for_records(true), CheckKind::Xxh3);
        assert_eq!(CheckKind::for_records(false), CheckKind::Blake3);
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
