//! A Rust program using boxlite through its C ABI (include/boxlite.h): load
//! an image, boot a box, run a command, check its output and exit code, and
//! check that a bad handle is a typed error. The declarations below mirror
//! the header by hand; no crates are needed.
use std::ffi::{c_char, c_int, CStr, CString};
use std::ptr;

#[repr(C)]
struct Error {
    code: c_int,
    message: *mut c_char,
}
#[repr(C)]
struct Exit {
    exit_code: c_int,
    signal: c_int,
    timed_out: c_int,
}
#[repr(C)]
struct RunResult {
    exit: Exit,
    stdout_data: *mut u8,
    stdout_len: usize,
    stderr_data: *mut u8,
    stderr_len: usize,
}
enum Runtime {}
enum Box {}

const BOXLITE_OK: c_int = 0;
const BOXLITE_ERR_INVALID_ARGUMENT: c_int = 1;

extern "C" {
    fn boxlite_version() -> *const c_char;
    fn boxlite_error_free(err: *mut Error);
    fn boxlite_string_free(s: *mut c_char);
    fn boxlite_runtime_new(opts: *const c_char, out: *mut *mut Runtime, err: *mut *mut Error) -> c_int;
    fn boxlite_runtime_free(rt: *mut Runtime);
    fn boxlite_image_load(rt: *mut Runtime, path: *const c_char, out: *mut *mut c_char, err: *mut *mut Error) -> c_int;
    fn boxlite_box_create(rt: *mut Runtime, opts: *const c_char, out: *mut *mut Box, err: *mut *mut Error) -> c_int;
    fn boxlite_box_run(b: *mut Box, cmd: *const c_char, out: *mut *mut RunResult, err: *mut *mut Error) -> c_int;
    fn boxlite_result_free(r: *mut RunResult);
    fn boxlite_box_remove(b: *mut Box, force: c_int, err: *mut *mut Error) -> c_int;
    fn boxlite_box_free(b: *mut Box);
}

/// Turns a status and error object into a Result, freeing the error.
fn check(rc: c_int, err: *mut Error, what: &str) -> Result<(), String> {
    if rc == BOXLITE_OK {
        return Ok(());
    }
    let msg = if err.is_null() {
        String::from("no message")
    } else {
        let m = unsafe { CStr::from_ptr((*err).message) }.to_string_lossy().into_owned();
        unsafe { boxlite_error_free(err) };
        m
    };
    Err(format!("{what}: status {rc}: {msg}"))
}

fn main() -> Result<(), String> {
    let image = std::env::var("BOXLITE_TEST_IMAGE").map_err(|_| "set BOXLITE_TEST_IMAGE".to_string())?;
    let home = std::env::temp_dir().join(format!("bxr.{}", std::process::id()));
    let version = unsafe { CStr::from_ptr(boxlite_version()) }.to_string_lossy();
    println!("libboxlite {version}");

    let opts = CString::new(format!("{{\"home\":\"{}\"}}", home.display())).unwrap();
    let mut rt: *mut Runtime = ptr::null_mut();
    let mut err: *mut Error = ptr::null_mut();
    check(unsafe { boxlite_runtime_new(opts.as_ptr(), &mut rt, &mut err) }, err, "runtime")?;
    let result = run(rt, &image);
    unsafe { boxlite_runtime_free(rt) };
    let _ = std::fs::remove_dir_all(&home);
    result?;
    println!("1 passed, 0 failed");
    Ok(())
}

fn run(rt: *mut Runtime, image: &str) -> Result<(), String> {
    let mut err: *mut Error = ptr::null_mut();
    let mut json: *mut c_char = ptr::null_mut();
    let path = CString::new(image).unwrap();
    check(unsafe { boxlite_image_load(rt, path.as_ptr(), &mut json, &mut err) }, err, "image load")?;
    unsafe { boxlite_string_free(json) };

    let mut b: *mut Box = ptr::null_mut();
    let opts = CString::new(r#"{"image":"alpine:latest","memory_mib":256}"#).unwrap();
    check(unsafe { boxlite_box_create(rt, opts.as_ptr(), &mut b, &mut err) }, err, "create")?;

    let cmd = CString::new(r#"{"argv":["sh","-c","echo hello from rust; uname -r; exit 7"]}"#).unwrap();
    let mut res: *mut RunResult = ptr::null_mut();
    let rc = unsafe { boxlite_box_run(b, cmd.as_ptr(), &mut res, &mut err) };
    let outcome = check(rc, err, "run").and_then(|_| {
        let r = unsafe { &*res };
        let out = unsafe { std::slice::from_raw_parts(r.stdout_data, r.stdout_len) };
        let out = String::from_utf8_lossy(out).into_owned();
        let code = r.exit.exit_code;
        unsafe { boxlite_result_free(res) };
        print!("{out}");
        if !out.starts_with("hello from rust\n") || !out.contains("\n6.1.") || code != 7 {
            return Err(format!("unexpected result: exit {code}, stdout {out:?}"));
        }
        // A freed or bogus handle is a typed error, not a crash.
        let rc = unsafe { boxlite_box_run(0xdead as *mut Box, cmd.as_ptr(), &mut res, ptr::null_mut()) };
        if rc != BOXLITE_ERR_INVALID_ARGUMENT {
            return Err(format!("bogus handle gave status {rc}"));
        }
        Ok(())
    });
    check(unsafe { boxlite_box_remove(b, 1, &mut err) }, err, "remove")?;
    unsafe { boxlite_box_free(b) };
    outcome
}
