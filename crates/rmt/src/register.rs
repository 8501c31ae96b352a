//! The stateful memory of a loaded program: every register array's cells in
//! one flat block, each register a range of it (its stage's SRAM).

use crate::phv::width_mask;
use crate::program::Program;

/// Where a register's cells are and how wide they are.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RegisterLayout {
    pub(crate) base: usize,
    pub(crate) entries: usize,
    /// A cell's width: values written are truncated by it.
    pub(crate) mask: u64,
}

/// All registers of a program.
#[derive(Debug)]
pub(crate) struct RegisterFile {
    cells: Vec<u64>,
    layout: Vec<RegisterLayout>,
}

impl RegisterFile {
    /// Every register of `program`, all cells 0.
    pub(crate) fn new(program: &Program) -> Self {
        let mut base = 0;
        let layout = program
            .registers
            .iter()
            .map(|r| {
                let l = RegisterLayout {
                    base,
                    entries: r.entries as usize,
                    mask: width_mask(r.bytes * 8),
                };
                base += l.entries;
                l
            })
            .collect();
        RegisterFile {
            cells: vec![0; base],
            layout,
        }
    }

    /// The layout of register `r` (an index the loader checked).
    pub(crate) fn layout(&self, r: usize) -> RegisterLayout {
        self.layout[r]
    }

    /// Cell `index` of register `r`, if it has that cell.
    pub(crate) fn read(&self, r: usize, index: usize) -> Option<u64> {
        let l = self.layout[r];
        (index < l.entries).then(|| self.cells[l.base + index])
    }

    /// Writes cell `index` of register `r` truncated to its width; false if
    /// it has no such cell.
    pub(crate) fn write(&mut self, r: usize, index: usize, value: u64) -> bool {
        let l = self.layout[r];
        if index >= l.entries {
            return false;
        }
        self.cells[l.base + index] = value & l.mask;
        true
    }

    /// The cell at a flat position an action's register port resolved.
    pub(crate) fn cell(&self, at: usize) -> u64 {
        self.cells[at]
    }

    pub(crate) fn set_cell(&mut self, at: usize, value: u64) {
        self.cells[at] = value;
    }
}
