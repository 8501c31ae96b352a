//! The packet header vector: the fields a packet carries from stage to stage.
//!
//! Every field has a width in bits; a value written to it is truncated to
//! that width, as a PHV container of that size would (sequence numbers wrap
//! at 2^32 because their field is 32 bits wide).

use serde::Serialize;

/// Index of a field in a program's PHV.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct FieldId(pub(crate) u16);

impl FieldId {
    /// The field at `index` in declaration order (the loader rejects an
    /// index the program does not declare).
    pub const fn from_index(index: u16) -> Self {
        FieldId(index)
    }

    /// Position of the field in the PHV.
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

/// A declared PHV field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldDecl {
    pub name: String,
    pub bits: u8,
}

impl FieldDecl {
    /// The mask a value of this field is truncated with.
    pub fn mask(&self) -> u64 {
        width_mask(self.bits)
    }
}

/// All-ones in the low `bits` bits (`bits` >= 64 keeps every bit).
pub fn width_mask(bits: u8) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// The values of one packet's fields. Parsers, deparsers and the control
/// plane see the whole vector; actions only see the fields they declared.
/// The pipeline truncates every value to its field's width after each step
/// that may write (parser, stage, mirror parser).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Phv {
    values: Vec<u64>,
}

impl Phv {
    pub(crate) fn new(fields: usize) -> Self {
        Phv {
            values: vec![0; fields],
        }
    }

    /// The value of `field` (0 until something writes it).
    pub fn get(&self, field: FieldId) -> u64 {
        self.values.get(field.index()).copied().unwrap_or(0)
    }

    /// Writes `value` (a field the program does not declare is ignored).
    pub fn set(&mut self, field: FieldId, value: u64) {
        if let Some(v) = self.values.get_mut(field.index()) {
            *v = value;
        }
    }

    /// All `fields` fields back to 0.
    pub(crate) fn reset(&mut self, fields: usize) {
        self.values.clear();
        self.values.resize(fields, 0);
    }

    pub(crate) fn raw(&self, index: usize) -> u64 {
        self.values[index]
    }

    pub(crate) fn set_raw(&mut self, index: usize, value: u64, mask: u64) {
        self.values[index] = value & mask;
    }

    /// Truncates every field to its width.
    pub(crate) fn truncate(&mut self, masks: &[u64]) {
        for (v, m) in self.values.iter_mut().zip(masks) {
            *v &= m;
        }
    }
}
