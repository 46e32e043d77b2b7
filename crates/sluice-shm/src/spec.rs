//! What a segment is for: the kind tag, layout version, capacities and data length its creator
//! records in the header and its openers must agree with.

use crate::header::{CAPACITY_COUNT, KIND_LEN};
use std::fmt;

/// What a segment's data area holds, as 8 ASCII bytes (shorter tags are NUL-padded), e.g.
/// `SegmentKind::new(*b"vegaspsc")`. An opener expecting one kind refuses another.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SegmentKind([u8; KIND_LEN]);

impl SegmentKind {
    /// The kind with this tag.
    pub const fn new(tag: [u8; KIND_LEN]) -> Self {
        Self(tag)
    }

    /// The tag's bytes, as stored in the header.
    pub const fn as_bytes(&self) -> &[u8; KIND_LEN] {
        &self.0
    }
}

impl fmt::Display for SegmentKind {
    /// The tag without its NUL padding, other non-printable bytes escaped.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let len = self
            .0
            .iter()
            .rposition(|b| *b != 0)
            .map_or(0, |last| last + 1);
        write!(f, "{}", self.0[..len].escape_ascii())
    }
}

impl fmt::Debug for SegmentKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SegmentKind(\"{self}\")")
    }
}

/// Everything the header records about a segment besides its magic and creator: the creator
/// passes it to [`crate::Segment::create`], an opener passes what it expects to
/// [`crate::Segment::open`], and every field must match.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SegmentSpec {
    /// What the data area holds.
    pub kind: SegmentKind,
    /// The version of the data area's layout, owned by whoever defines the kind; bump it when
    /// that layout changes so that old and new processes refuse each other's segments.
    pub layout_version: u32,
    /// Two capacities the kind defines (a ring: its slot count and slot size, say); unused
    /// ones are zero.
    pub capacities: [u64; CAPACITY_COUNT],
    /// How many bytes the data area has.
    pub data_len: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_displays_without_padding_and_escapes_the_rest() {
        assert_eq!(SegmentKind::new(*b"vega\0\0\0\0").to_string(), "vega");
        assert_eq!(SegmentKind::new(*b"osr-mpsc").to_string(), "osr-mpsc");
        assert_eq!(SegmentKind::new([0; 8]).to_string(), "");
        assert_eq!(SegmentKind::new(*b"a\nb\0\0\0\0\0").to_string(), "a\\nb");
        assert_eq!(
            format!("{:?}", SegmentKind::new(*b"vega\0\0\0\0")),
            "SegmentKind(\"vega\")"
        );
    }
}
