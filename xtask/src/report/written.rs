//! What the report may overwrite in `--out`: only files it wrote itself.

use crate::report;
use crate::testing::{committed, expectations};

#[test]
fn a_file_in_out_that_the_report_did_not_write_is_refused_and_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // A second run into the same folder replaces what the first wrote.
    report::run(&expectations(), &[committed()], dir, None).unwrap();
    report::run(&expectations(), &[committed()], dir, None).unwrap();
    for (name, mine) in [
        ("report.md", "# My notes on the H200\n"),
        ("gain.svg", "<svg><!-- drawn by hand --></svg>\n"),
        // Shorter than the generated-by line: only its first bytes are compared.
        ("report.md", "<!--"),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, mine).unwrap();
        let e = report::run(&expectations(), &[committed()], dir, None).unwrap_err();
        let text = e.to_string();
        assert!(
            matches!(e, report::ReportError::NotOurs(ref p) if p == &path),
            "{text}"
        );
        assert!(
            text.contains(name) && text.contains("not overwritten"),
            "{text}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), mine);
        std::fs::remove_file(&path).unwrap();
    }
}
