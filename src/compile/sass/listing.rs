//! Reading a disassembler's listing: each function's instructions, normalised (no address,
//! branch targets relative), with the encoding's control word where the listing prints it.
use crate::model::results;
use std::collections::BTreeMap;

/// Opcodes whose operand is a place in the function's code: a label in nvdisasm's listing
/// (`` `(.L_x_81) ``, numbered across the whole CUBIN), an address in cuobjdump's. Both are
/// written relative to the instruction, so that a digest depends neither on the tool nor on
/// which other kernels share the CUBIN (the phased loops' `BSSY` once did).
const TARGETED: [&str; 2] = ["BRA", "BSSY"];

/// One instruction, normalised: no address, no encoding, branch targets relative.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instruction {
    pub(crate) address: u64,
    /// `@P0 BRA` keeps its predicate; `.reuse` flags are kept (they are ptxas decisions).
    pub text: String,
    /// For branches: the target address.
    pub(crate) target: Option<u64>,
    /// The second (high) 64-bit word of the encoding, where the listing prints it: the
    /// control fields are in its top 23 bits.
    pub(crate) high_word: Option<u64>,
}

impl Instruction {
    /// The opcode without predicate or modifiers: `FFMA`, `BRA`, `LDL`
    /// ([`crate::model::results::sass_opcode`]).
    pub(crate) fn opcode(&self) -> &str {
        results::sass_opcode(&self.text)
    }

    /// Operands, `.reuse` flags removed: `FFMA R10, R10, R9.reuse, UR8` -> [R10, R10, R9, UR8]
    /// (`crate::model::results::sass_operands`).
    pub fn operands(&self) -> Vec<String> {
        results::sass_operands(&self.text)
    }

    /// The text with the branch target written relative to this instruction, in instructions.
    pub(super) fn normalised(&self) -> String {
        match self.target {
            Some(t) => {
                let rel = (t as i64 - self.address as i64) / 16;
                let head = self
                    .text
                    .split_whitespace()
                    .take_while(|w| !w.starts_with("0x") && !w.starts_with('`'))
                    .collect::<Vec<_>>()
                    .join(" ");
                format!("{head} {rel:+}")
            }
            None => self.text.split_whitespace().collect::<Vec<_>>().join(" "),
        }
    }
}

/// A line that could not be read.
pub type ParseError = crate::error::LineError;

/// Parses disassembly into each function's instructions.
pub fn parse(text: &str) -> Result<BTreeMap<String, Vec<Instruction>>, ParseError> {
    let mut r = Reader::default();
    for (i, raw) in text.lines().enumerate() {
        r.line(i + 1, raw.trim())?;
    }
    r.resolve()?;
    if let Some((name, _)) = r.out.iter().find(|(_, v)| v.is_empty()) {
        return Err(ParseError {
            what: "SASS",
            line: text.lines().count(),
            message: format!("function {name} has no instructions (truncated?)"),
        });
    }
    Ok(r.out)
}

/// What [`parse`] keeps between lines.
#[derive(Default)]
struct Reader {
    out: BTreeMap<String, Vec<Instruction>>,
    /// The function whose instructions follow, if any.
    current: Option<String>,
    /// Each label's address, as `function/label`.
    labels: BTreeMap<String, u64>,
    /// Labels seen since the last instruction: the next one's.
    pending_labels: Vec<String>,
    /// Branches to a label: function, index, line, label.
    unresolved: Vec<(String, usize, usize, String)>,
    /// Set after an instruction line that printed its first encoding word: the next
    /// encoding-only line is its second.
    awaiting_high: Option<String>,
}

impl Reader {
    /// Reads line `n` (trimmed).
    fn line(&mut self, n: usize, line: &str) -> Result<(), ParseError> {
        let err = |message: String| ParseError {
            what: "SASS",
            line: n,
            message,
        };
        if self.header(line) {
            return Ok(());
        }
        if line.starts_with(".L_") && line.ends_with(':') {
            self.pending_labels
                .push(line.trim_end_matches(':').to_string());
            return Ok(());
        }
        let Some(rest) = line.strip_prefix("/*") else {
            return Ok(());
        };
        let Some((addr, body)) = rest.split_once("*/") else {
            return Err(err(format!("unterminated address comment in {line:?}")));
        };
        if !addr.bytes().all(|b| b.is_ascii_hexdigit()) || addr.is_empty() {
            // An encoding line: /* 0x000fe2... */, the second word of the instruction above.
            if let Some(f) = self.awaiting_high.take() {
                let word = encoding_word(addr)
                    .ok_or_else(|| err(format!("bad encoding word {:?}", addr.trim())))?;
                if let Some(i) = self.out.get_mut(&f).and_then(|v| v.last_mut()) {
                    i.high_word = Some(word);
                }
            }
            return Ok(());
        }
        let address =
            u64::from_str_radix(addr, 16).map_err(|e| err(format!("bad address {addr:?}: {e}")))?;
        if body.trim_start().starts_with('.') {
            return Ok(()); // a data directive (.byte, .dword...) in nvdisasm output
        }
        self.instruction(n, (address, addr), body).map_err(err)
    }

    /// A function header (cuobjdump's `Function : k`, nvdisasm's `.text.k:`) or an
    /// nvdisasm section line: whether `line` was one.
    fn header(&mut self, line: &str) -> bool {
        let name = line.strip_prefix("Function : ").map(str::trim).or_else(|| {
            line.strip_prefix(".text.")
                .and_then(|l| l.strip_suffix(':'))
        });
        if let Some(name) = name {
            self.current = Some(name.to_string());
            self.out.entry(name.to_string()).or_default();
            return true;
        }
        if let Some(section) = line.strip_prefix(".section") {
            // nvdisasm: data sections (.debug_frame, .nv.info...) hold no instructions.
            if !section.trim_start().starts_with(".text.") {
                self.current = None;
            }
            return true;
        }
        false
    }

    /// The instruction at `address` (`addr` as the listing writes it) on line `n`, `body`
    /// what follows its address.
    fn instruction(
        &mut self,
        n: usize,
        (address, addr): (u64, &str),
        body: &str,
    ) -> Result<(), String> {
        let Some(instr) = body
            .split(';')
            .next()
            .map(str::trim)
            .filter(|s| !s.is_empty())
        else {
            return Err(format!("no instruction after address {addr} (truncated?)"));
        };
        let name = self
            .current
            .clone()
            .ok_or("instruction before any function header")?;
        self.awaiting_high = body
            .split_once(';')
            .and_then(|(_, w)| w.trim().strip_prefix("/*"))
            .and_then(|w| w.strip_suffix("*/"))
            .and_then(encoding_word)
            .map(|_| name.clone());
        for l in self.pending_labels.drain(..) {
            self.labels.insert(format!("{name}/{l}"), address);
        }
        let target = self.target(n, &name, instr)?;
        if let Some(prev) = self.out.get(&name).and_then(|v| v.last()) {
            if address <= prev.address {
                return Err(format!(
                    "address {address:#06x} does not follow {:#06x} in {name} (garbled or spliced?)",
                    prev.address
                ));
            }
        }
        self.out.entry(name).or_default().push(Instruction {
            address,
            text: instr.to_string(),
            target,
            high_word: None,
        });
        Ok(())
    }

    /// The address a branch of function `name` goes to, when `instr` is one: cuobjdump's
    /// `0x..`, or nvdisasm's label, resolved once the whole listing is read.
    fn target(&mut self, n: usize, name: &str, instr: &str) -> Result<Option<u64>, String> {
        let targeted = instr.split_whitespace().any(|w| {
            TARGETED
                .iter()
                .any(|t| w == *t || w.strip_prefix(t).is_some_and(|r| r.starts_with('.')))
        });
        if !targeted {
            return Ok(None);
        }
        if let Some(hex) = instr.split_whitespace().find_map(|w| w.strip_prefix("0x")) {
            return u64::from_str_radix(hex.trim_end_matches(';'), 16)
                .map(Some)
                .map_err(|e| format!("bad branch target in {instr:?}: {e}"));
        }
        let Some(l) = instr.split("`(").nth(1).and_then(|s| s.split(')').next()) else {
            return Err(format!("branch without a target: {instr:?}"));
        };
        let index = self.out.get(name).map_or(0, |v| v.len());
        self.unresolved
            .push((name.to_string(), index, n, l.to_string()));
        Ok(None)
    }

    /// Sets the target of every branch to a label.
    fn resolve(&mut self) -> Result<(), ParseError> {
        for (f, idx, line, label) in std::mem::take(&mut self.unresolved) {
            let addr = self
                .labels
                .get(&format!("{f}/{label}"))
                .copied()
                .ok_or(ParseError {
                    what: "SASS",
                    line,
                    message: format!("branch to unknown label {label}"),
                })?;
            if let Some(i) = self.out.get_mut(&f).and_then(|v| v.get_mut(idx)) {
                i.target = Some(addr);
            }
        }
        Ok(())
    }
}

/// One encoding word as a listing prints it between `/*` and `*/`: ` 0x000fe20008000007 `.
fn encoding_word(text: &str) -> Option<u64> {
    let hex = text.trim().strip_prefix("0x")?;
    (hex.len() == 16)
        .then(|| u64::from_str_radix(hex, 16).ok())
        .flatten()
}

/// The architecture a listing is for: nvdisasm's `.target sm_90`, or cuobjdump's
/// `.headerflags @"EF_CUDA_SM90 ..."` (the first one, for a listing of one CUBIN).
pub fn architecture(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let l = l.trim();
        if let Some(t) = l.strip_prefix(".target") {
            return t.split_whitespace().next().map(str::to_string);
        }
        let flags = l.strip_prefix(".headerflags")?;
        let sm = flags.split("EF_CUDA_SM").nth(1)?;
        let digits: String = sm.chars().take_while(char::is_ascii_digit).collect();
        (!digits.is_empty()).then(|| format!("sm_{digits}"))
    })
}

/// For each instruction of a loop body, the FFMA chain (partial accumulator) it extends,
/// numbered in order of first appearance; `None` for anything but an FFMA
/// (`crate::model::results::chain_of_each`).
pub fn chain_of_each(body: &[Instruction]) -> Vec<Option<usize>> {
    let texts: Vec<&str> = body.iter().map(|i| i.text.as_str()).collect();
    results::chain_of_each(&texts)
}

/// Reads normalised loop-body lines (as stored in results) back as instructions.
pub fn from_lines(lines: &[String]) -> Vec<Instruction> {
    lines
        .iter()
        .enumerate()
        .map(|(i, l)| Instruction {
            address: 16 * i as u64,
            text: l.clone(),
            target: None,
            high_word: None,
        })
        .collect()
}
