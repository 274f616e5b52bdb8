//! Run commands in microVM sandboxes: a safe API over libboxlite (the
//! `boxlite-sys` crate).
//!
//! ```no_run
//! let rt = boxlite::Runtime::new()?;
//! let bx = rt.create(&boxlite::BoxOptions::new("alpine:latest").memory_mib(256))?;
//! let out = bx.run(&boxlite::Command::new(["uname", "-a"]))?;
//! print!("{}", String::from_utf8_lossy(&out.stdout));
//! bx.remove(true)?;
//! # Ok::<(), boxlite::Error>(())
//! ```
//!
//! Options and infos are the C ABI's JSON (see `include/boxlite.h`): the
//! builders here cover the common fields, and `*_json` methods take or give
//! the JSON itself. Every handle may be used from any thread.
use std::ffi::{CStr, CString};
use std::fmt;
use std::path::Path;
use std::ptr;
use std::sync::Arc;
use std::time::Duration;

use boxlite_sys as sys;
use serde_json::{json, Map, Value};

/// An error of the library: its status code, the kind it names
/// (`not_found`, `timeout`, ...) and a message saying what failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub code: i32,
    pub message: String,
}

impl Error {
    /// The kind of the error, as `boxlite_status_name` names it.
    pub fn kind(&self) -> &'static str {
        status_name(self.code)
    }

    fn local(code: i32, message: impl Into<String>) -> Error {
        Error {
            code,
            message: message.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.kind())
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// The library's version ("MAJOR.MINOR.PATCH").
pub fn version() -> &'static str {
    // SAFETY: a static NUL-terminated string.
    unsafe { CStr::from_ptr(sys::boxlite_version()) }.to_str().unwrap_or("")
}

fn status_name(code: i32) -> &'static str {
    // SAFETY: a static NUL-terminated string for every code.
    unsafe { CStr::from_ptr(sys::boxlite_status_name(code)) }
        .to_str()
        .unwrap_or("unknown")
}

/// check turns a status and its error object into a Result (freeing it).
fn check(rc: sys::c_int, err: *mut sys::boxlite_error_t) -> Result<()> {
    if rc == sys::BOXLITE_OK {
        return Ok(());
    }
    let message = if err.is_null() {
        status_name(rc).to_string()
    } else {
        // SAFETY: err is the library's error object, freed once here.
        unsafe {
            let m = CStr::from_ptr((*err).message).to_string_lossy().into_owned();
            sys::boxlite_error_free(err);
            m
        }
    };
    Err(Error { code: rc, message })
}

fn cstring(s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::local(sys::BOXLITE_ERR_INVALID_ARGUMENT, format!("{s:?} holds a NUL byte")))
}

fn path_cstring(p: &Path) -> Result<CString> {
    cstring(
        p.to_str()
            .ok_or_else(|| Error::local(sys::BOXLITE_ERR_INVALID_ARGUMENT, format!("{p:?} is not UTF-8")))?,
    )
}

/// take_string copies and frees a string the library returned.
fn take_string(s: *mut sys::c_char) -> String {
    if s.is_null() {
        return String::new();
    }
    // SAFETY: the library's string, freed once here.
    unsafe {
        let v = CStr::from_ptr(s).to_string_lossy().into_owned();
        sys::boxlite_string_free(s);
        v
    }
}

/// A call that returns a JSON string: out and err, checked.
fn json_call(f: impl FnOnce(*mut *mut sys::c_char, *mut *mut sys::boxlite_error_t) -> sys::c_int) -> Result<Value> {
    let mut out = ptr::null_mut();
    let mut err = ptr::null_mut();
    check(f(&mut out, &mut err), err)?;
    let s = take_string(out);
    serde_json::from_str(&s).map_err(|e| Error::local(sys::BOXLITE_ERR_INTERNAL, format!("the library's JSON: {e}")))
}

/// A status-only call, checked.
fn status_call(f: impl FnOnce(*mut *mut sys::boxlite_error_t) -> sys::c_int) -> Result<()> {
    let mut err = ptr::null_mut();
    check(f(&mut err), err)
}

struct RuntimeHandle(*mut sys::boxlite_runtime_t);
// SAFETY: the C ABI's handles may be used from any thread, concurrently.
unsafe impl Send for RuntimeHandle {}
unsafe impl Sync for RuntimeHandle {}
impl Drop for RuntimeHandle {
    fn drop(&mut self) {
        // SAFETY: freed once, after every Box holding it is gone.
        unsafe { sys::boxlite_runtime_free(self.0) }
    }
}

/// A runtime: the boxes and images of a home directory ($BOXLITE_HOME, else
/// ~/.boxlite). Dropping it stops the boxes this process started that are
/// not detached.
#[derive(Clone)]
pub struct Runtime {
    h: Arc<RuntimeHandle>,
}

impl Runtime {
    /// A runtime with the default home and assets.
    pub fn new() -> Result<Runtime> {
        Runtime::with_options_json("{}")
    }

    /// A runtime in home (a directory of its own).
    pub fn with_home(home: impl AsRef<Path>) -> Result<Runtime> {
        let home = home
            .as_ref()
            .to_str()
            .ok_or_else(|| Error::local(sys::BOXLITE_ERR_INVALID_ARGUMENT, "home is not UTF-8"))?;
        Runtime::with_options_json(&json!({ "home": home }).to_string())
    }

    /// A runtime from the runtime options' JSON (see include/boxlite.h).
    pub fn with_options_json(options: &str) -> Result<Runtime> {
        let opts = cstring(options)?;
        let mut rt = ptr::null_mut();
        // SAFETY: valid C strings and out-parameters.
        status_call(|err| unsafe { sys::boxlite_runtime_new(opts.as_ptr(), &mut rt, err) })?;
        Ok(Runtime {
            h: Arc::new(RuntimeHandle(rt)),
        })
    }

    /// Loads an OCI layout directory or a docker-archive tar into the image
    /// store; returns the images it held (JSON).
    pub fn image_load(&self, path: impl AsRef<Path>) -> Result<Value> {
        let p = path_cstring(path.as_ref())?;
        // SAFETY: a live runtime handle and valid pointers.
        json_call(|out, err| unsafe { sys::boxlite_image_load(self.h.0, p.as_ptr(), out, err) })
    }

    /// Pulls an image from its registry into the store.
    pub fn image_pull(&self, reference: &str) -> Result<Value> {
        let r = cstring(reference)?;
        // SAFETY: as above.
        json_call(|out, err| unsafe { sys::boxlite_image_pull(self.h.0, r.as_ptr(), out, err) })
    }

    /// Creates a box (configured: it boots at start, or at the first run,
    /// exec or copy). Its image is pulled when not in the store.
    pub fn create(&self, options: &BoxOptions) -> Result<Box> {
        self.create_json(&options.to_json())
    }

    /// Creates a box from the box options' JSON (see include/boxlite.h).
    pub fn create_json(&self, options: &str) -> Result<Box> {
        let opts = cstring(options)?;
        let mut b = ptr::null_mut();
        // SAFETY: as above.
        status_call(|err| unsafe { sys::boxlite_box_create(self.h.0, opts.as_ptr(), &mut b, err) })?;
        Ok(Box {
            raw: b,
            _rt: self.h.clone(),
        })
    }

    /// The box with that id or name.
    pub fn get(&self, id_or_name: &str) -> Result<Box> {
        let n = cstring(id_or_name)?;
        let mut b = ptr::null_mut();
        // SAFETY: as above.
        status_call(|err| unsafe { sys::boxlite_box_get(self.h.0, n.as_ptr(), &mut b, err) })?;
        Ok(Box {
            raw: b,
            _rt: self.h.clone(),
        })
    }

    /// Every box of the home (a JSON array of box infos).
    pub fn list(&self) -> Result<Value> {
        // SAFETY: as above.
        json_call(|out, err| unsafe { sys::boxlite_box_list(self.h.0, out, err) })
    }
}

/// What a box is made with. Fields left unset take the library's defaults.
#[derive(Debug, Clone)]
pub struct BoxOptions {
    fields: Map<String, Value>,
}

impl BoxOptions {
    pub fn new(image: &str) -> BoxOptions {
        let mut fields = Map::new();
        fields.insert("image".into(), image.into());
        BoxOptions { fields }
    }
    pub fn name(self, name: &str) -> Self {
        self.set("name", name.into())
    }
    pub fn memory_mib(self, mib: u32) -> Self {
        self.set("memory_mib", mib.into())
    }
    pub fn cpus(self, cpus: u32) -> Self {
        self.set("cpus", cpus.into())
    }
    /// Removed when it stops (the default), or kept with its disk.
    pub fn auto_remove(self, remove: bool) -> Self {
        self.set("auto_remove", remove.into())
    }
    /// A host folder or file at guest_path in the box (virtio-fs).
    pub fn volume(mut self, host_path: impl AsRef<Path>, guest_path: &str, read_only: bool) -> Self {
        let v = json!({"host_path": host_path.as_ref().to_string_lossy(), "guest_path": guest_path, "read_only": read_only});
        match self.fields.get_mut("volumes") {
            Some(Value::Array(vs)) => vs.push(v),
            _ => {
                self.fields.insert("volumes".into(), Value::Array(vec![v]));
            }
        }
        self
    }
    /// Any other field of the box options (see include/boxlite.h).
    pub fn set(mut self, key: &str, value: Value) -> Self {
        self.fields.insert(key.into(), value);
        self
    }
    pub fn to_json(&self) -> String {
        Value::Object(self.fields.clone()).to_string()
    }
}

/// A process to run in a box: argv is never joined into a shell string.
#[derive(Debug, Clone)]
pub struct Command {
    fields: Map<String, Value>,
}

impl Command {
    pub fn new<I, S>(argv: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let argv: Vec<Value> = argv.into_iter().map(|a| Value::from(a.as_ref())).collect();
        let mut fields = Map::new();
        fields.insert("argv".into(), Value::Array(argv));
        Command { fields }
    }
    pub fn env(mut self, key: &str, value: &str) -> Self {
        let env = self.fields.entry("env").or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(m) = env {
            m.insert(key.into(), value.into());
        }
        self
    }
    pub fn cwd(self, dir: &str) -> Self {
        self.set("cwd", dir.into())
    }
    pub fn user(self, user: &str) -> Self {
        self.set("user", user.into())
    }
    /// Kills the process after that long (its exit says timed_out).
    pub fn timeout(self, t: Duration) -> Self {
        self.set("timeout_secs", t.as_secs_f64().into())
    }
    /// Keeps stdin open for Execution::write (exec only).
    pub fn stdin(self, open: bool) -> Self {
        self.set("stdin", open.into())
    }
    /// Any other field of the command (see include/boxlite.h).
    pub fn set(mut self, key: &str, value: Value) -> Self {
        self.fields.insert(key.into(), value);
        self
    }
    pub fn to_json(&self) -> String {
        Value::Object(self.fields.clone()).to_string()
    }
}

/// How a process ended: exit_code is 128+signal when a signal killed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitStatus {
    pub exit_code: i32,
    pub signal: i32,
    pub timed_out: bool,
}

impl ExitStatus {
    fn from(e: sys::boxlite_exit_t) -> ExitStatus {
        ExitStatus {
            exit_code: e.exit_code,
            signal: e.signal,
            timed_out: e.timed_out != 0,
        }
    }
    pub fn success(&self) -> bool {
        self.exit_code == 0
    }
}

/// A finished process and its output (Box::run).
#[derive(Debug, Clone)]
pub struct Output {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// Output past the runtime's limit was dropped.
    pub truncated: bool,
}

/// Where a copy goes and how (see the copy options of include/boxlite.h).
#[derive(Debug, Clone, Default)]
pub struct CopyOptions {
    pub follow_symlinks: bool,
    pub no_overwrite: bool,
}

impl CopyOptions {
    fn to_json(&self) -> String {
        json!({"follow_symlinks": self.follow_symlinks, "overwrite": !self.no_overwrite}).to_string()
    }
}

/// A box: a microVM booted from an image. The handle keeps its runtime
/// alive; dropping it leaves the box as it is (stop or remove it first).
pub struct Box {
    raw: *mut sys::boxlite_box_t,
    _rt: Arc<RuntimeHandle>,
}

// SAFETY: the C ABI's handles may be used from any thread, concurrently.
unsafe impl Send for Box {}
unsafe impl Sync for Box {}

impl Drop for Box {
    fn drop(&mut self) {
        // SAFETY: freed once.
        unsafe { sys::boxlite_box_free(self.raw) }
    }
}

impl Box {
    /// The box's id (12 hex digits).
    pub fn id(&self) -> String {
        // SAFETY: static for the handle's life.
        let p = unsafe { sys::boxlite_box_id(self.raw) };
        if p.is_null() {
            return String::new();
        }
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    /// The box's info (JSON: state, config, runtime, ...).
    pub fn info(&self) -> Result<Value> {
        // SAFETY: a live box handle.
        json_call(|out, err| unsafe { sys::boxlite_box_info(self.raw, out, err) })
    }

    /// Boots the box (a running one is left as it is).
    pub fn start(&self) -> Result<()> {
        // SAFETY: as above.
        status_call(|err| unsafe { sys::boxlite_box_start(self.raw, err) })
    }

    /// Stops the box (and removes it when it auto-removes, the default).
    pub fn stop(&self) -> Result<()> {
        // SAFETY: as above.
        status_call(|err| unsafe { sys::boxlite_box_stop(self.raw, err) })
    }

    /// Removes the box; force stops a running one first.
    pub fn remove(&self, force: bool) -> Result<()> {
        // SAFETY: as above.
        status_call(|err| unsafe { sys::boxlite_box_remove(self.raw, force as sys::c_int, err) })
    }

    /// Runs cmd to completion and collects its output (a timeout is no
    /// error: see status.timed_out).
    pub fn run(&self, cmd: &Command) -> Result<Output> {
        let c = cstring(&cmd.to_json())?;
        let mut res: *mut sys::boxlite_result_t = ptr::null_mut();
        // SAFETY: as above; res is freed once below.
        status_call(|err| unsafe { sys::boxlite_box_run(self.raw, c.as_ptr(), &mut res, err) })?;
        unsafe {
            let r = &*res;
            let bytes = |p: *mut u8, n: usize| {
                if p.is_null() || n == 0 {
                    Vec::new()
                } else {
                    std::slice::from_raw_parts(p, n).to_vec()
                }
            };
            let out = Output {
                status: ExitStatus::from(r.exit),
                stdout: bytes(r.stdout_data, r.stdout_len),
                stderr: bytes(r.stderr_data, r.stderr_len),
                truncated: r.stdout_truncated != 0 || r.stderr_truncated != 0,
            };
            sys::boxlite_result_free(res);
            Ok(out)
        }
    }

    /// Starts cmd and returns it running, its output to be read.
    pub fn exec(&self, cmd: &Command) -> Result<Execution> {
        let c = cstring(&cmd.to_json())?;
        let mut ex = ptr::null_mut();
        // SAFETY: as above.
        status_call(|err| unsafe { sys::boxlite_box_exec(self.raw, c.as_ptr(), &mut ex, err) })?;
        Ok(Execution {
            raw: ex,
            _rt: self._rt.clone(),
        })
    }

    /// Copies a host file or folder into the box, as docker cp does.
    pub fn copy_in(&self, host_src: impl AsRef<Path>, box_dst: &str, opts: &CopyOptions) -> Result<()> {
        let (s, d, o) = (path_cstring(host_src.as_ref())?, cstring(box_dst)?, cstring(&opts.to_json())?);
        // SAFETY: as above.
        status_call(|err| unsafe { sys::boxlite_box_copy_in(self.raw, s.as_ptr(), d.as_ptr(), o.as_ptr(), err) })
    }

    /// Copies a file or folder of the box to the host, as docker cp does.
    pub fn copy_out(&self, box_src: &str, host_dst: impl AsRef<Path>, opts: &CopyOptions) -> Result<()> {
        let (s, d, o) = (cstring(box_src)?, path_cstring(host_dst.as_ref())?, cstring(&opts.to_json())?);
        // SAFETY: as above.
        status_call(|err| unsafe { sys::boxlite_box_copy_out(self.raw, s.as_ptr(), d.as_ptr(), o.as_ptr(), err) })
    }
}

/// Which output stream to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// A running process (Box::exec). Dropping it kills a process still
/// running, with its process group.
pub struct Execution {
    raw: *mut sys::boxlite_execution_t,
    _rt: Arc<RuntimeHandle>,
}

// SAFETY: the C ABI's handles may be used from any thread, concurrently.
unsafe impl Send for Execution {}
unsafe impl Sync for Execution {}

impl Drop for Execution {
    fn drop(&mut self) {
        // SAFETY: freed once.
        unsafe { sys::boxlite_execution_free(self.raw) }
    }
}

/// A wait or read timeout: None waits as long as needed.
fn millis(t: Option<Duration>) -> i64 {
    t.map_or(-1, |d| d.as_millis().min(i64::MAX as u128) as i64)
}

impl Execution {
    /// Reads some output of stream into buf: Ok(Some(n)) with n > 0,
    /// Ok(None) at its end. Blocks up to timeout (None: until output or the
    /// end); a timeout with nothing read is an Error of kind "timeout".
    pub fn read(&self, stream: Stream, buf: &mut [u8], timeout: Option<Duration>) -> Result<Option<usize>> {
        let s = match stream {
            Stream::Stdout => sys::BOXLITE_STDOUT,
            Stream::Stderr => sys::BOXLITE_STDERR,
        };
        let mut n = 0usize;
        let mut err = ptr::null_mut();
        // SAFETY: buf is valid for buf.len() bytes.
        let rc = unsafe { sys::boxlite_execution_read(self.raw, s, buf.as_mut_ptr(), buf.len(), millis(timeout), &mut n, &mut err) };
        match rc {
            sys::BOXLITE_EOF => Ok(None),
            sys::BOXLITE_AGAIN => Err(Error::local(sys::BOXLITE_ERR_TIMEOUT, "no output in time")),
            _ => check(rc, err).map(|_| Some(n)),
        }
    }

    /// Reads stream to its end.
    pub fn read_to_end(&self, stream: Stream) -> Result<Vec<u8>> {
        let mut all = Vec::new();
        let mut buf = [0u8; 64 << 10];
        while let Some(n) = self.read(stream, &mut buf, None)? {
            all.extend_from_slice(&buf[..n]);
        }
        Ok(all)
    }

    /// Writes all of buf to the process's stdin (Command::stdin(true)).
    pub fn write(&self, buf: &[u8]) -> Result<()> {
        // SAFETY: buf is valid for buf.len() bytes.
        status_call(|err| unsafe { sys::boxlite_execution_write(self.raw, buf.as_ptr(), buf.len(), err) })
    }

    pub fn close_stdin(&self) -> Result<()> {
        // SAFETY: a live execution handle.
        status_call(|err| unsafe { sys::boxlite_execution_close_stdin(self.raw, err) })
    }

    /// Waits for the exit, up to timeout (None: as long as it takes); a
    /// timeout is an Error of kind "timeout", the process running on.
    pub fn wait(&self, timeout: Option<Duration>) -> Result<ExitStatus> {
        let mut exit = sys::boxlite_exit_t {
            exit_code: 0,
            signal: 0,
            timed_out: 0,
        };
        let mut err = ptr::null_mut();
        // SAFETY: a live execution handle and out-parameters.
        let rc = unsafe { sys::boxlite_execution_wait(self.raw, millis(timeout), &mut exit, &mut err) };
        if rc == sys::BOXLITE_AGAIN {
            return Err(Error::local(sys::BOXLITE_ERR_TIMEOUT, "the process is still running"));
        }
        check(rc, err).map(|_| ExitStatus::from(exit))
    }

    /// Sends signal (SIGTERM is 15) to the process.
    pub fn signal(&self, signal: i32) -> Result<()> {
        // SAFETY: a live execution handle.
        status_call(|err| unsafe { sys::boxlite_execution_signal(self.raw, signal, err) })
    }

    /// Kills the process and its process group.
    pub fn kill(&self) -> Result<()> {
        // SAFETY: a live execution handle.
        status_call(|err| unsafe { sys::boxlite_execution_kill(self.raw, err) })
    }
}
