//! Boots a real box through the safe API: run, exec with stdin and streams,
//! copies both ways, a volume, and typed errors. Needs BOXLITE_TEST_IMAGE
//! (the busybox-based alpine:latest `make test` builds) and the library's
//! assets (an installed prefix, or BOXLITE_ASSETS).
use std::time::Duration;

use boxlite::{BoxOptions, Command, CopyOptions, Runtime, Stream};

#[test]
fn a_box_end_to_end() {
    let image = std::env::var("BOXLITE_TEST_IMAGE").expect("set BOXLITE_TEST_IMAGE (make test-rust does)");
    let tmp = std::env::temp_dir().join(format!("boxlite-rs.{}", std::process::id()));
    let (home, vol) = (tmp.join("home"), tmp.join("vol"));
    std::fs::create_dir_all(&vol).unwrap();
    std::fs::write(vol.join("in.txt"), "from the host\n").unwrap();
    let result = std::panic::catch_unwind(|| exercise(&image, &home, &vol, &tmp));
    let _ = std::fs::remove_dir_all(&tmp);
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}

fn exercise(image: &str, home: &std::path::Path, vol: &std::path::Path, tmp: &std::path::Path) {
    assert_eq!(boxlite::version(), "0.1.0");
    let rt = Runtime::with_home(home).unwrap();
    let loaded = rt.image_load(image).unwrap();
    assert!(loaded.to_string().contains("alpine"), "loaded {loaded}");

    let missing = rt.get("no-such-box").err().unwrap();
    assert_eq!(missing.kind(), "not_found", "{missing}");

    let bx = rt
        .create(&BoxOptions::new("alpine:latest").memory_mib(256).volume(vol, "/mnt/host", false))
        .unwrap();
    assert_eq!(bx.id().len(), 12);

    // run: output and exit code; a volume both ways.
    let out = bx
        .run(&Command::new([
            "sh",
            "-c",
            "cat /mnt/host/in.txt; echo err >&2; echo written > /mnt/host/out.txt; exit 3",
        ]))
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "from the host\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "err\n");
    assert_eq!(out.status.exit_code, 3);
    assert_eq!(std::fs::read_to_string(vol.join("out.txt")).unwrap(), "written\n");
    let timed = bx.run(&Command::new(["sleep", "30"]).timeout(Duration::from_millis(500))).unwrap();
    assert!(timed.status.timed_out, "{:?}", timed.status);

    // exec: stdin in, streams out.
    let ex = bx
        .exec(&Command::new(["sh", "-c", "tr a-z A-Z; echo done >&2"]).stdin(true))
        .unwrap();
    ex.write(b"shout\n").unwrap();
    ex.close_stdin().unwrap();
    assert_eq!(ex.read_to_end(Stream::Stdout).unwrap(), b"SHOUT\n");
    assert_eq!(ex.read_to_end(Stream::Stderr).unwrap(), b"done\n");
    assert!(ex.wait(Some(Duration::from_secs(30))).unwrap().success());

    // copies, as docker cp.
    let src = tmp.join("copied.txt");
    std::fs::write(&src, "copied in\n").unwrap();
    bx.copy_in(&src, "/tmp/", &CopyOptions::default()).unwrap();
    let back = tmp.join("back.txt");
    bx.copy_out("/tmp/copied.txt", &back, &CopyOptions::default()).unwrap();
    assert_eq!(std::fs::read_to_string(&back).unwrap(), "copied in\n");
    let refused = bx
        .copy_out(
            "/tmp/copied.txt",
            &back,
            &CopyOptions {
                no_overwrite: true,
                ..Default::default()
            },
        )
        .expect_err("no_overwrite");
    assert_eq!(refused.kind(), "already_exists", "{refused}");

    bx.remove(true).unwrap();
    assert_eq!(rt.get(&bx.id()).err().map(|e| e.kind()), Some("not_found"));
}
