//! Runs the README's Rust program (this package's binary) in a home of its
//! own where the test image is loaded, so that its alpine:latest is found.
use std::process::Command;

#[test]
fn the_readme_program_runs_a_box() {
    let image = std::env::var("BOXLITE_TEST_IMAGE").expect("set BOXLITE_TEST_IMAGE (make test-rust does)");
    let home = std::env::temp_dir().join(format!("boxlite-readme-rs.{}", std::process::id()));
    boxlite::Runtime::with_home(&home).unwrap().image_load(&image).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_boxlite-example"))
        .env("BOXLITE_HOME", &home)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&home);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "exit {:?}: {stdout}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.starts_with("Linux ") && stdout.ends_with("\nexit 0\n"), "printed {stdout:?}");
}
