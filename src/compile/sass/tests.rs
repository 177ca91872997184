//! The listing reader and the summary on small listings.

use super::*;

const CUOBJDUMP: &str = "
\t\tFunction : k
    /*0000*/                   CS2R R4, SR_CLOCKLO ;                        /* 0x0000000000047805 */
                                                                             /* 0x000fe40000015000 */
    /*0010*/                   FFMA R10, R10, R9.reuse, UR8 ;                /* 0x000000080a0a7e23 */
                                                                             /* 0x000fe20008000009 */
    /*0020*/                   FFMA R11, R11, R9, UR8 ;                     /* 0x000000080b0b7e23 */
    /*0030*/                   CS2R R6, SR_CLOCKLO ;                        /* 0x0000000000067805 */
    /*0040*/              @!P0 BRA 0x10 ;                                   /* 0xfffffffc00f08947 */
    /*0050*/                   EXIT ;                                       /* 0x000000000000794d */
    /*0060*/                   BRA 0x60;                                    /* 0xfffffffc00fc7947 */
";

const NVDISASM: &str = "
.text.k:
    /*0000*/                   CS2R R4, SR_CLOCKLO ;
.L_x_0:
    /*0010*/                   FFMA R10, R10, R9.reuse, UR8 ;
    /*0020*/                   FFMA R11, R11, R9, UR8 ;
    /*0030*/                   CS2R R6, SR_CLOCKLO ;
    /*0040*/              @!P0 BRA `(.L_x_0) ;
    /*0050*/                   EXIT ;
.L_x_1:
    /*0060*/                   BRA `(.L_x_1);
";

#[test]
fn both_disassemblers_give_the_same_loop_and_digest() {
    let a = summarise(&parse(CUOBJDUMP).unwrap()["k"]).unwrap();
    let b = summarise(&parse(NVDISASM).unwrap()["k"]).unwrap();
    assert_eq!(a, b);
    assert_eq!(
        a.loop_body,
        vec![
            "FFMA R10, R10, R9.reuse, UR8",
            "FFMA R11, R11, R9, UR8",
            "CS2R R6, SR_CLOCKLO",
            "@!P0 BRA -3"
        ]
    );
    assert_eq!(a.loop_ffma, 2);
    assert_eq!(a.loop_ffma_destinations, vec!["R10", "R11"]);
    assert!(a.ffma_accumulates_in_place);
    assert_eq!(a.loop_partials, vec![1, 1]);
    assert!(a.local_memory_instructions.is_empty());
}

#[test]
fn a_bssy_target_is_relative_whatever_the_label_is_numbered() {
    let cuobjdump = "
\t\tFunction : k
    /*0000*/                   BSSY B0, 0x20 ;
    /*0010*/                   NOP ;
    /*0020*/                   BSYNC B0 ;
";
    // nvdisasm numbers labels across the CUBIN: the same kernel beside others.
    let nvdisasm = "
.text.k:
    /*0000*/                   BSSY B0, `(.L_x_81) ;
    /*0010*/                   NOP ;
.L_x_81:
    /*0020*/                   BSYNC B0 ;
";
    let (a, b) = (parse(cuobjdump).unwrap(), parse(nvdisasm).unwrap());
    assert_eq!(a["k"][0].normalised(), "BSSY B0, +2");
    assert_eq!(b["k"][0].normalised(), "BSSY B0, +2");
}

#[test]
fn opcodes_and_operands_drop_predicates_modifiers_and_reuse() {
    let i = Instruction {
        address: 0,
        text: "@P1 FFMA.FTZ R1, R2.reuse, R3, R1".into(),
        target: None,
        high_word: None,
    };
    assert_eq!(i.opcode(), "FFMA");
    assert_eq!(i.operands(), vec!["R1", "R2", "R3", "R1"]);
    // Found by the sass fuzz target: with more than one space (or a tab) after the
    // predicate, the opcode and operands differed from those of the normalised loop
    // body, so `cargo xtask sass` showed other chains than the summary recorded.
    for text in ["@P1   FFMA R1, R2, R3, R1", "@P1\tFFMA R1, R2, R3, R1"] {
        let i = Instruction {
            address: 0,
            text: text.into(),
            target: None,
            high_word: None,
        };
        assert_eq!(
            (i.opcode(), i.operands()),
            (
                "FFMA",
                vec!["R1".to_string(), "R2".into(), "R3".into(), "R1".into()]
            ),
            "{text:?}"
        );
    }
}

#[test]
fn malformed_and_truncated_sass_are_errors() {
    assert!(parse("        /*0010*/ FFMA R1, R1, R2, R3 ;")
        .unwrap_err()
        .message
        .contains("before any function"));
    assert!(parse("Function : k\n        /*0010*/   ")
        .unwrap_err()
        .message
        .contains("no instruction"));
    assert!(parse("Function : k\n")
        .unwrap_err()
        .message
        .contains("no instructions"));
    assert!(parse("Function : k\n /*0010*/ @P0 BRA `(.L_x_9) ;")
        .unwrap_err()
        .message
        .contains("unknown label"));
    assert!(parse("Function : k\n /*0010*/ BRA ;")
        .unwrap_err()
        .message
        .contains("without a target"));
    // Found by fuzzing: a spliced listing whose addresses repeat made the loop search
    // slice backwards and panic.
    let spliced = "Function : k\n /*0000*/ CS2R R4, SR_CLOCKLO ;\n /*0010*/ FFMA R1, R1, R2, R3 ;\n /*0000*/ @P0 BRA 0x10 ;";
    assert!(parse(spliced)
        .unwrap_err()
        .message
        .contains("does not follow"));
    // A phased start waits on the clock in a loop of its own before the measured one:
    // the measured loop is the first clock loop that does arithmetic.
    let phased = parse(
        "Function : k\n /*0000*/ CS2R R4, SR_CLOCKLO ;\n /*0010*/ CS2R R6, SR_CLOCKLO ;\n \
         /*0020*/ @P0 BRA 0x10 ;\n /*0030*/ CS2R R8, SR_CLOCKLO ;\n \
         /*0040*/ FFMA R1, R1, R2, R3 ;\n /*0050*/ @P1 BRA 0x30 ;\n /*0060*/ EXIT ;",
    )
    .unwrap();
    let s = summarise(&phased["k"]).unwrap();
    assert_eq!(
        (s.loop_ffma, s.loop_body.len()),
        (1, 3),
        "{:?}",
        s.loop_body
    );
    let no_loop = parse("Function : k\n /*0000*/ FFMA R1, R1, R2, R3 ;\n /*0010*/ EXIT ;").unwrap();
    assert!(summarise(&no_loop["k"])
        .unwrap_err()
        .to_string()
        .contains("no backward branch"));
}
