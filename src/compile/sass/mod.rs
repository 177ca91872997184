//! Part of stage 3 (compile): the SASS of the CUBIN that ran, parsed per kernel, and what
//! the study's conclusions rest on read off it: local-memory instructions, the measured
//! loop, its FFMAs and their destination registers, and a digest of the normalised code.
//!
//! Reads `cuobjdump -sass` output (`Function : NAME` headers, `/*ADDR*/ INSTR ;` lines) and
//! `nvdisasm` output (`.text.NAME:` headers, `.L_x_N:` labels, `` `(.L_x_N) `` targets).
//! Both print each instruction's 128-bit encoding as two `/* 0x... */` words (nvdisasm
//! with `-hex`); the second word holds the control fields ([`control`]), which the
//! summary keeps as the loop's schedule.
//! Pure text in, plain data out: tested on SASS recorded on the H200.

pub mod control;
mod listing;
mod summary;

pub use listing::{architecture, chain_of_each, from_lines, parse, Instruction, ParseError};
pub use summary::{summarise, summarise_on, SummaryError};

#[cfg(test)]
mod recorded;
#[cfg(test)]
mod tests;
