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

/// Most fields a program's PHV holds. The PHV is a fixed set of containers
/// in hardware too (§5.1.1); a fixed capacity also lets the stage loop index
/// it without a bounds check per field (see [`Phv::raw`]).
pub const MAX_FIELDS: usize = 128;

/// Every field's width mask by PHV position (undeclared positions 0), so
/// the stage loop truncates a write without a bounds check.
#[derive(Debug, Clone)]
pub(crate) struct FieldMasks(Box<[u64; MAX_FIELDS]>);

impl FieldMasks {
    pub(crate) fn new(fields: &[FieldDecl]) -> Self {
        let mut masks = Box::new([0; MAX_FIELDS]);
        for (m, f) in masks.iter_mut().zip(fields) {
            *m = f.mask();
        }
        FieldMasks(masks)
    }

    #[inline(always)]
    pub(crate) fn of(&self, index: usize) -> u64 {
        self.0[index & (MAX_FIELDS - 1)]
    }
}

/// The values of one packet's fields. Parsers, deparsers and the control
/// plane see the whole vector; actions only see the fields they declared.
/// The pipeline truncates every value to its field's width after each step
/// that may write (parser, stage, mirror parser).
#[derive(Clone)]
pub struct Phv {
    /// The program's fields are `values[..fields]`; the rest stays 0.
    values: Box<[u64; MAX_FIELDS]>,
    fields: usize,
}

impl std::fmt::Debug for Phv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Phv")
            .field("values", &self.declared())
            .finish()
    }
}

impl PartialEq for Phv {
    fn eq(&self, other: &Self) -> bool {
        self.fields == other.fields && self.declared() == other.declared()
    }
}

impl Eq for Phv {}

impl Phv {
    /// A PHV of `fields` fields (at most [`MAX_FIELDS`], which the loader
    /// checks), all 0.
    pub(crate) fn new(fields: usize) -> Self {
        Phv {
            values: Box::new([0; MAX_FIELDS]),
            fields: fields.min(MAX_FIELDS),
        }
    }

    /// The value of `field` (0 until something writes it).
    pub fn get(&self, field: FieldId) -> u64 {
        self.declared().get(field.index()).copied().unwrap_or(0)
    }

    /// Writes `value` (a field the program does not declare is ignored).
    pub fn set(&mut self, field: FieldId, value: u64) {
        let fields = self.fields;
        if let Some(v) = self.values[..fields].get_mut(field.index()) {
            *v = value;
        }
    }

    fn declared(&self) -> &[u64] {
        &self.values[..self.fields]
    }

    /// All `fields` fields back to 0.
    pub(crate) fn reset(&mut self, fields: usize) {
        self.values[..self.fields].fill(0);
        self.fields = fields.min(MAX_FIELDS);
    }

    /// Becomes a copy of `other` without allocating.
    pub(crate) fn copy_from(&mut self, other: &Phv) {
        let n = other.fields;
        if self.fields > n {
            self.values[n..self.fields].fill(0);
        }
        self.values[..n].copy_from_slice(other.declared());
        self.fields = n;
    }

    /// The value at `index`, which the loader checked is a declared field.
    /// Masking by the fixed capacity keeps the access in bounds without a
    /// check (an index beyond the declared fields would read a 0 that no
    /// one wrote, never memory outside the PHV).
    #[inline(always)]
    pub(crate) fn raw(&self, index: usize) -> u64 {
        self.values[index & (MAX_FIELDS - 1)]
    }

    /// Writes `value` truncated by `mask` at `index` (see [`Phv::raw`]).
    #[inline(always)]
    pub(crate) fn set_raw(&mut self, index: usize, value: u64, mask: u64) {
        self.values[index & (MAX_FIELDS - 1)] = value & mask;
    }

    /// Truncates every field to its width.
    pub(crate) fn truncate(&mut self, masks: &[u64]) {
        for (v, m) in self.values.iter_mut().zip(masks) {
            *v &= m;
        }
    }
}
