//! One-time codes: the short secret `braid recv` prints and the sender
//! types (`7-orbit-lantern`), turned into a session key by SPAKE2 in
//! `secure`.
//!
//! A code is a number in `1..=999` and two words from a list of 256, drawn
//! from the operating system's random source: log2(999) + 2 × 8 ≈ 26 bits.
//! That is far too little against an offline search, and SPAKE2 gives an
//! attacker none: each connection that tries a code tests exactly one guess,
//! online, and the receiver stops after [`MAX_CODE_FAILURES`] failed tries,
//! so an attacker's chance is at most 3 / 2^26 ≈ 4.5 × 10⁻⁸ per code.
//!
//! Main type: [`Code`] (parse with `str::parse`, make with
//! [`Code::generate`]); `Debug` never prints the code.

/// Failed code attempts after which a receiver gives up: enough for a
/// user's two typos, few enough that guessing stays hopeless (see the
/// module docs).
pub const MAX_CODE_FAILURES: u32 = 3;

/// The 256 words of a code (short, distinct, easy to say and type).
const WORDS: [&str; 256] = [
    "acid", "acorn", "actor", "adobe", "agent", "album", "alder", "alley", "amber", "anchor",
    "angel", "ankle", "apple", "apron", "arbor", "arena", "armor", "arrow", "aspen", "atlas",
    "attic", "autumn", "avenue", "bacon", "badge", "bagel", "baker", "bamboo", "banjo", "barley",
    "barn", "basil", "basin", "beach", "beacon", "bean", "bear", "beaver", "bell", "berry",
    "bison", "blade", "blanket", "bloom", "board", "bolt", "bonnet", "border", "bottle", "bounty",
    "bramble", "brass", "bread", "brick", "bridge", "brook", "broom", "bucket", "buffalo", "bugle",
    "butter", "button", "cabin", "cable", "cactus", "camel", "candle", "canoe", "canyon", "carbon",
    "cargo", "carpet", "castle", "cedar", "cellar", "cement", "chalk", "cherry", "chess",
    "chimney", "cider", "circle", "citrus", "clay", "cliff", "clover", "cobalt", "cocoa", "comet",
    "copper", "coral", "cotton", "cougar", "crane", "crater", "cricket", "crystal", "daisy",
    "delta", "desert", "diamond", "dolphin", "donkey", "dragon", "drum", "eagle", "easel", "echo",
    "elbow", "ember", "engine", "falcon", "fennel", "fern", "ferry", "fiddle", "field", "flame",
    "flute", "forest", "fossil", "fountain", "galaxy", "garden", "garlic", "geyser", "ginger",
    "glacier", "globe", "goat", "granite", "grape", "gravel", "guitar", "hammer", "harbor", "harp",
    "hazel", "helmet", "heron", "hollow", "honey", "horizon", "iceberg", "igloo", "indigo",
    "island", "ivory", "jacket", "jade", "jasmine", "jelly", "jigsaw", "jungle", "kayak", "kernel",
    "kettle", "kitten", "koala", "ladder", "lagoon", "lantern", "laurel", "lemon", "lichen",
    "lily", "linen", "lobster", "locket", "lotus", "magnet", "mango", "maple", "marble", "meadow",
    "melon", "meteor", "mint", "mirror", "mosaic", "moss", "motor", "muffin", "nectar", "needle",
    "nickel", "nutmeg", "oasis", "ocean", "olive", "onion", "orbit", "orchid", "otter", "oyster",
    "paddle", "palm", "panda", "paper", "parrot", "peach", "pebble", "pepper", "piano", "pillow",
    "pine", "planet", "plum", "pocket", "pony", "poppy", "prairie", "pumpkin", "quartz", "quill",
    "rabbit", "radish", "raven", "reef", "ribbon", "river", "robin", "rocket", "saddle", "salmon",
    "satin", "shell", "silver", "sparrow", "spruce", "squid", "summit", "sunset", "swan", "tango",
    "teapot", "thistle", "thunder", "tiger", "timber", "tomato", "torch", "tulip", "tunnel",
    "turtle", "umbrella", "valley", "velvet", "violin", "walnut", "walrus", "willow", "window",
    "wizard", "yarn", "zebra",
];

/// A one-time code: `N-word-word`, lower case.
#[derive(Clone, PartialEq, Eq)]
pub struct Code(String);

impl std::fmt::Debug for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Code(..)")
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a string is not a code, or none could be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CodeError {
    /// Not of the form `N-word-word` with words from the list.
    #[error("not a braid code (expected the form 7-orbit-lantern, as braid recv prints it)")]
    Malformed,
    /// The operating system's random source failed.
    #[error("no randomness for a code: {0}")]
    Random(String),
}

impl Code {
    /// A fresh code from the operating system's random source.
    ///
    /// # Errors
    /// [`CodeError::Random`] if the random source fails.
    pub fn generate() -> Result<Code, CodeError> {
        use rand::TryRngCore;
        let mut rng = rand::rngs::OsRng;
        let mut next = || {
            rng.try_next_u32()
                .map_err(|e| CodeError::Random(e.to_string()))
        };
        // Rejection sampling keeps the number uniform over 1..=999.
        let number = loop {
            let x = next()? >> 22; // 0..1024
            if x < 999 {
                break x + 1;
            }
        };
        let r = next()?;
        let (a, b) = ((r & 0xff) as usize, ((r >> 8) & 0xff) as usize);
        Ok(Code(format!("{number}-{}-{}", WORDS[a], WORDS[b])))
    }

    /// The code's bytes, the SPAKE2 password.
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl std::str::FromStr for Code {
    type Err = CodeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim().to_ascii_lowercase();
        let mut parts = s.split('-');
        let (Some(n), Some(a), Some(b), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(CodeError::Malformed);
        };
        let number_ok = !n.is_empty()
            && n.len() <= 3
            && !n.starts_with('0')
            && n.bytes().all(|c| c.is_ascii_digit());
        if !number_ok || !WORDS.contains(&a) || !WORDS.contains(&b) {
            return Err(CodeError::Malformed);
        }
        Ok(Code(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_distinct() {
        let mut w = WORDS.to_vec();
        w.sort_unstable();
        w.dedup();
        assert_eq!(w.len(), 256);
    }

    #[test]
    fn generated_codes_parse_and_differ() {
        let a = Code::generate().unwrap();
        let b = Code::generate().unwrap();
        assert_eq!(a.to_string().parse::<Code>().unwrap(), a);
        assert_ne!(a, b, "26 bits: a repeat is a 1 in 67 million event");
        assert_eq!(format!("{a:?}"), "Code(..)");
    }

    #[test]
    fn malformed_codes_are_refused() {
        assert!("7-orbit-lantern".parse::<Code>().is_ok());
        assert_eq!(
            " 7-Orbit-LANTERN ".parse::<Code>().unwrap().to_string(),
            "7-orbit-lantern"
        );
        for bad in [
            "",
            "7",
            "7-orbit",
            "07-orbit-lantern",
            "1000-orbit-lantern",
            "7-orbit-nosuchword",
            "7-orbit-lantern-x",
            "x-orbit-lantern",
        ] {
            assert!(bad.parse::<Code>().is_err(), "{bad}");
        }
    }
}
