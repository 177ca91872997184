//! The listing reader and the summary on the SASS recorded on the H200.

use super::*;
use crate::model::results;
use crate::model::variant::{matrix, Sink};

/// `cuobjdump -sass` of the CUBINs the H200 profile's recorded run measured (sm_90,
/// tests/data/h200/): its 129 variants, its contexts included.
const H200: &str = include_str!("../../../tests/data/h200/sass.txt");
/// `nvdisasm -ndf` (CUDA 13.0.85, on the H200) of the same CUBINs, with their data
/// sections and without the encoding words.
const H200_NVDISASM: &str = include_str!("../../../tests/data/h200/nvdisasm.txt");

#[test]
fn nvdisasm_and_cuobjdump_agree_on_every_loop() {
    let a = parse(H200).unwrap();
    let b = parse(H200_NVDISASM).unwrap();
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    let mut same_digest = 0;
    for (name, f) in &a {
        let (x, y) = (summarise(f).unwrap(), summarise(&b[name]).unwrap());
        assert_eq!(
            (x.loop_ffma, &x.loop_partials),
            (y.loop_ffma, &y.loop_partials),
            "{name}"
        );
        assert_eq!(
            x.local_memory_instructions.len(),
            y.local_memory_instructions.len(),
            "{name}"
        );
        same_digest += usize::from(x.digest == y.digest);
    }
    // The normalisation (no addresses, no encodings, relative branch targets) makes the
    // digest independent of the tool: a runner with either one checks the same baselines.
    assert_eq!(same_digest, a.len());
}

#[test]
fn the_h200_words_fit_the_published_layout_and_every_loop_has_a_schedule() {
    assert_eq!(architecture(H200).as_deref(), Some("sm_90"));
    let functions = parse(H200).unwrap();
    let (mut words, mut marked) = (0, 0);
    for (name, f) in &functions {
        for i in f {
            // cuobjdump prints both words of every instruction.
            let w = i.high_word.unwrap_or_else(|| panic!("{name}: {}", i.text));
            let d = control::decode(w);
            assert_eq!(d.unused, 0, "{name}: bits 126-127 of {}", i.text);
            assert_eq!(d.reuse, control::reuse_marks(&i.text), "{name}: {}", i.text);
            words += 1;
            marked += usize::from(d.reuse != 0);
        }
        let s = summarise_on(f, Some("sm_90")).unwrap();
        assert_eq!(s.schedule_unknown, None, "{name}");
        assert_eq!(s.loop_control.len(), s.loop_body.len(), "{name}");
        assert_eq!(
            s.schedule_digest.as_deref(),
            Some(results::schedule_digest(&s.loop_body, &s.loop_control).as_str())
        );
    }
    assert!(
        words > 6_000 && marked > 900,
        "{words} words, {marked} with reuse"
    );
    // The listing without its words (nvdisasm without -hex) and an architecture whose
    // layout is unknown are said, not guessed.
    let plain = parse(H200_NVDISASM).unwrap();
    let s = summarise_on(&plain["chain7_acc1_effective1"], Some("sm_90")).unwrap();
    assert!(s.schedule_unknown.unwrap().contains("no encoding words"));
    let f = &functions["chain7_acc1_effective1"];
    let s = summarise_on(f, Some("sm_100")).unwrap();
    assert_eq!(
        s.schedule_unknown.as_deref(),
        Some("control fields not decoded: layout of sm_100 unknown")
    );
    assert_eq!((s.loop_control.len(), s.schedule_digest), (0, None));
}

#[test]
fn a_word_that_does_not_fit_the_layout_is_said() {
    let functions = parse(H200).unwrap();
    let mut f = functions["chain7_acc1_effective1"].clone();
    let last = f.len() - 2; // inside or after the loop: set the bits on every one
    for i in f.iter_mut().take(last) {
        i.high_word = i.high_word.map(|w| w | (1 << 62));
    }
    let s = summarise_on(&f, Some("sm_90")).unwrap();
    assert!(s.schedule_unknown.unwrap().contains("bits 126-127"));
}

#[test]
fn every_h200_variant_has_n_ffmas_over_e_registers_and_no_local_memory() {
    let functions = parse(H200).unwrap();
    assert_eq!(
        functions.len(),
        129,
        "24 documented variants, 45 sink-isolation ones and 60 in contexts"
    );
    let sink = [Sink::B, Sink::C, Sink::D];
    let all = matrix(&[7, 13, 29], &[1, 2, 3, 4, 5, 7, 8, 16])
        .into_iter()
        .chain(sink.iter().flat_map(|&m| {
            matrix(&[7, 13, 29], &[1, 2, 3, 4, 8])
                .into_iter()
                .map(move |v| v.with_sink(m))
        }));
    for v in all {
        let s = summarise(&functions[&v.name()]).unwrap();
        assert_eq!(s.loop_ffma, v.chain, "{v}: {:#?}", s.loop_body);
        assert_eq!(
            s.loop_partials.len() as u32,
            v.effective(),
            "{v}: {:?}",
            s.loop_partials
        );
        let (lo, hi) = (
            s.loop_partials.iter().min().unwrap(),
            s.loop_partials.iter().max().unwrap(),
        );
        assert!(
            hi - lo <= 1,
            "{v}: round-robin chains {:?}",
            s.loop_partials
        );
        if v.effective() == 1 {
            assert!(s.ffma_accumulates_in_place, "{v}");
        }
        assert!(s.local_memory_instructions.is_empty(), "{v}");
        assert_eq!(s.digest.len(), 64);
    }
    let acc1 = summarise(&functions["chain29_acc1_effective1"]).unwrap();
    assert_eq!(acc1.loop_ffma_destinations, vec!["R11"]);
}
