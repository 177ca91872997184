use super::*;

/// Sets `name` for `f`. Each test uses names of its own, which nothing else in the
/// crate reads, so that tests running at once never see each other's values.
fn with<T>(name: &str, value: &str, f: impl FnOnce() -> T) -> T {
    std::env::set_var(name, value);
    let out = f();
    std::env::remove_var(name);
    out
}

const A: &str = "ACCPROBE_TEST_CONFIG_A";
const B: &str = "ACCPROBE_TEST_CONFIG_B";
const C: &str = "ACCPROBE_TEST_CONFIG_C";
const D: &str = "ACCPROBE_TEST_CONFIG_D";
const E: &str = "ACCPROBE_TEST_CONFIG_E";
const F: &str = "ACCPROBE_TEST_CONFIG_F";

#[test]
fn empty_is_unset() {
    assert_eq!(with(A, "", || text(A)), Ok(None));
    assert_eq!(with(A, "", || var_os(A)), None);
    assert_eq!(with(A, "", || path_var(A)), None);
    assert_eq!(with(A, "", || flag(A)), Ok(false));
    assert_eq!(with(A, "", || parsed(A, |_| None::<u8>)), Ok(None));
}

#[test]
fn only_whitespace_is_unset() {
    for blank in [" ", "\t", " \n "] {
        assert_eq!(with(B, blank, || text(B)), Ok(None), "{blank:?}");
        assert_eq!(with(B, blank, || var_os(B)), None, "{blank:?}");
        assert_eq!(with(B, blank, || flag(B)), Ok(false), "{blank:?}");
        assert_eq!(with(B, blank, || parsed(B, |_| None::<u8>)), Ok(None));
    }
    // Around a value, whitespace is trimmed before it is parsed.
    let three = with(B, " 3 ", || parsed(B, |t| t.parse::<u8>().ok()));
    assert_eq!(three, Ok(Some(3)));
}

#[test]
fn a_bad_value_is_an_error_naming_the_variable_the_value_and_what_it_takes() {
    let e = with(C, "abc", || parsed(C, retries)).unwrap_err();
    assert_eq!(e.variable(), Some(C));
    assert_eq!(e.to_string(), format!("{C}=\"abc\": expected a value"));
    assert!(with(C, "maybe", || flag(C)).is_err());
    for bad in ["-1", "abc", "NaN", "inf"] {
        assert!(with(C, bad, || parsed(C, seconds)).is_err(), "{bad}");
    }
    assert!(
        with(C, "2.5", || parsed(C, retries)).is_err(),
        "a whole number"
    );
    // A declared variable's message says what it takes, from the table (this one is
    // read only by a test's child process).
    let e = with(TEST_MARK_USED_ENV, "x", || {
        parsed(TEST_MARK_USED_ENV, |_| None::<()>)
    })
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("{TEST_MARK_USED_ENV}=\"x\": expected a folder")
    );
}

#[test]
fn bytes_that_are_not_utf8_are_an_error_never_unset() {
    use std::os::unix::ffi::OsStrExt;
    std::env::set_var(D, std::ffi::OsStr::from_bytes(b"1\xff"));
    let e = text(D).unwrap_err();
    let f = flag(D).unwrap_err();
    let raw = var_os(D);
    std::env::remove_var(D);
    assert!(
        matches!(&e, ConfigError::NotUtf8 { variable, .. } if variable == D),
        "{e}"
    );
    assert!(e.to_string().contains("not valid UTF-8"), "{e}");
    assert_eq!(f, e);
    assert!(raw.is_some(), "a path may be any bytes");
}

#[test]
fn the_contention_settings_have_their_defaults_and_limits() {
    assert_eq!(
        with(E, "1000", || parsed(E, retries)),
        Ok(Some(MAX_RETRIES))
    );
    assert_eq!(with(E, "0", || parsed(E, retries)), Ok(Some(0)));
    let long = with(E, "1e9", || parsed(E, wait));
    assert_eq!(long, Ok(Some(Duration::from_secs(3600))));
    let half = with(E, "0.5", || parsed(E, wait));
    assert_eq!(half, Ok(Some(Duration::from_millis(500))));
    let default = |name| variable(name).unwrap().default;
    assert_eq!(default(RETRIES_ENV), DEFAULT_RETRIES.to_string());
    assert_eq!(default(WAIT_ENV), DEFAULT_WAIT_S.to_string());
}

#[test]
fn the_disassembler_s_time_limit_is_more_than_zero_seconds_with_its_default() {
    for bad in ["0", "-1", "abc", "inf"] {
        assert!(with(F, bad, || parsed(F, time_limit)).is_err(), "{bad}");
    }
    let half = with(F, "0.5", || parsed(F, time_limit));
    assert_eq!(half, Ok(Some(Duration::from_millis(500))));
    let default = variable(DISASSEMBLER_TIMEOUT_ENV).unwrap().default;
    assert_eq!(default, DEFAULT_DISASSEMBLER_TIMEOUT_S.to_string());
}

#[test]
fn the_table_names_each_variable_once_and_every_constant() {
    let mut names: Vec<_> = VARIABLES.iter().map(|v| v.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), VARIABLES.len(), "a name declared twice");
    for v in VARIABLES {
        assert!(v.name.starts_with("ACCPROBE_"), "{}", v.name);
        assert!(!v.takes.is_empty() && !v.meaning.is_empty(), "{}", v.name);
    }
    for c in [
        PROFILE_ENV,
        MODE_ENV,
        REQUIRE_GPU_ENV,
        DEVICES_ENV,
        DEVICE_ENV,
        JUNIT_ENV,
        RESULTS_ENV,
        EXPECTATIONS_ENV,
        CACHE_ENV,
        EXTRA_OPTIONS_ENV,
        PARTS_ENV,
        DISASSEMBLER_ENV,
        DISASSEMBLER_TIMEOUT_ENV,
        NVRTC_ENV,
        TOOLCHAINS_ENV,
        REQUIRE_TOOLCHAINS_ENV,
        LOCK_DIR_ENV,
        LOCK_TIMEOUT_ENV,
        RETRIES_ENV,
        WAIT_ENV,
        TRACE_ENV,
        HISTORY_ENV,
        WORKER_ENV,
        ACTIVE_ENV,
        TEST_MARK_USED_ENV,
    ] {
        assert!(variable(c).is_some(), "{c} has no row in VARIABLES");
    }
}

#[test]
fn device_lists_are_parsed_for_their_syntax_only() {
    assert_eq!(ordinal_list(" 3 ,1,3"), Ok(vec![3, 1]));
    let e = ordinal_list(",").unwrap_err();
    assert_eq!(e, OrdinalListError::Empty { text: ",".into() });
    assert_eq!(e.to_string(), "\",\" names no device");
    let e = ordinal_list("0,x").unwrap_err();
    assert_eq!(e, OrdinalListError::NotAnOrdinal { part: "x".into() });
    assert!(e.to_string().contains("not a device ordinal"), "{e}");
}
