//! What a user gets after `cargo install --locked --path conformance`:
//! `metaroce --version` names the SPEC version it judges against (from the
//! spec model's registry), `metaroce completions SHELL` and `metaroce man`
//! generate non-empty output naming the subcommands, and `check --live` on a
//! build without the `libpcap` feature says what to rebuild with.

use std::process::{Command, Output};

fn metaroce(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_metaroce"))
        .args(args)
        .output()
        .expect("runs metaroce")
}

fn ok_stdout(args: &[&str]) -> String {
    let out = metaroce(args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "metaroce {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// The subcommands every generated text must mention.
const SUBCOMMANDS: &[&str] = &[
    "decode",
    "check",
    "run",
    "vectors",
    "spec",
    "completions",
    "man",
];

#[test]
fn version_names_the_spec_version_and_its_requirement_count() {
    let text = ok_stdout(&["--version"]);
    let version = metaroce_spec::requirements::spec_version();
    assert!(text.starts_with("metaroce "), "{text}");
    assert!(text.contains(env!("CARGO_PKG_VERSION")), "{text}");
    assert!(
        text.contains(&format!("MetaRoCE {version}")),
        "{text} does not name SPEC {version}"
    );
    let count = metaroce_spec::requirements::all().len();
    assert!(text.contains(&format!("{count} requirements")), "{text}");
}

#[test]
fn completions_for_every_shell_name_the_subcommands() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let text = ok_stdout(&["completions", shell]);
        assert!(text.len() > 1000, "{shell}: {} bytes", text.len());
        for sub in SUBCOMMANDS {
            assert!(text.contains(sub), "{shell} completions lack {sub}");
        }
    }
    let out = metaroce(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(4), "an unknown shell is bad input");
}

#[test]
fn man_page_and_one_page_per_subcommand() {
    let text = ok_stdout(&["man"]);
    assert!(
        text.contains(".TH metaroce 1"),
        "{}",
        &text[..text.len().min(300)]
    );
    for sub in SUBCOMMANDS {
        assert!(text.contains(sub), "man page lacks {sub}");
    }
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("metaroce-man-{}", std::process::id()));
    let dir_arg = dir.to_str().expect("UTF-8 path");
    ok_stdout(&["man", "--out-dir", dir_arg]);
    for page in ["metaroce.1", "metaroce-check.1", "metaroce-spec-show.1"] {
        let text = std::fs::read_to_string(dir.join(page)).expect(page);
        assert!(text.contains(".TH"), "{page} is not a man page");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[cfg(not(feature = "libpcap"))]
#[test]
fn check_live_without_libpcap_says_what_to_rebuild_with() {
    let out = metaroce(&["check", "--live", "eth0"]);
    assert_eq!(out.status.code(), Some(4));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--live eth0"), "{err}");
    assert!(err.contains("--features libpcap"), "{err}");
    assert!(!err.contains("unexpected argument"), "{err}");
}
