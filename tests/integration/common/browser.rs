//! A headless Chromium driven over the DevTools protocol on a pipe
//! (`--remote-debugging-pipe`: commands in on fd 3, answers and events out on fd 4, each a
//! JSON message ended by NUL), for the tests of the HTML pages: what a page renders, what
//! it logs and what it requests, and a screenshot of it.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use gjcfs::engine::json::{self, Value};

/// How long one protocol command may take.
const PATIENCE: Duration = Duration::from_secs(60);

/// The browsers tried, in order.
const BROWSERS: [&str; 3] = ["chromium", "chromium-browser", "google-chrome"];

/// The browser on PATH, if any.
fn browser_program() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    BROWSERS.iter().find_map(|name| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    })
}

/// Whether a browser test can run here; if not, [`super::cannot_run`] (a failure in CI).
pub fn browser_ready() -> bool {
    browser_program().is_some()
        || super::cannot_run("no Chromium is installed (apt-get install chromium)")
}

/// A running headless browser; killed and its profile removed when dropped.
pub struct Browser {
    child: Child,
    to_browser: File,
    from_browser: Receiver<Value>,
    next_id: u64,
    /// Events not yet looked at, in arrival order.
    events: Vec<Value>,
    profile: tempfile::TempDir,
}

/// A page loaded in its own tab, with what happened while it loaded.
pub struct Page {
    session: String,
    /// Console errors, uncaught exceptions and browser log errors.
    pub errors: Vec<String>,
    /// Every URL the page requested, itself included.
    pub requests: Vec<String>,
}

/// A pipe whose ends are closed on exec: (read, write).
fn pipe() -> (RawFd, RawFd) {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`.
    #[cfg(target_os = "linux")]
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    // Elsewhere (macOS has no pipe2) the flag is set right after.
    // SAFETY: pipe writes two descriptors into `fds`; fcntl only sets their flags.
    #[cfg(not(target_os = "linux"))]
    let rc = unsafe {
        let rc = libc::pipe(fds.as_mut_ptr());
        for fd in fds {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
        rc
    };
    assert_eq!(rc, 0, "pipe: {}", std::io::Error::last_os_error());
    (fds[0], fds[1])
}

/// In the child: `fd` as `target`, open across exec.
fn place(fd: RawFd, target: RawFd) -> std::io::Result<()> {
    // SAFETY: plain descriptor calls between fork and exec.
    let rc = unsafe {
        if fd == target {
            libc::fcntl(fd, libc::F_SETFD, 0)
        } else {
            libc::dup2(fd, target)
        }
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

impl Browser {
    /// Starts the browser (see [`browser_ready`] first).
    pub fn start() -> Browser {
        let program = browser_program().expect("a browser is installed");
        let profile = tempfile::tempdir().unwrap();
        let (commands_read, commands_write) = pipe();
        let (events_read, events_write) = pipe();
        let mut command = Command::new(program);
        command
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--remote-debugging-pipe",
                "--hide-scrollbars",
                "--window-size=1200,1600",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            // Its own temporary files go with the profile: a killed browser leaves none.
            .env("TMPDIR", profile.path())
            // A group of its own, so that its helper processes are killed with it.
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: only async-signal-safe descriptor calls run between fork and exec.
        unsafe {
            command.pre_exec(move || {
                place(commands_read, 3)?;
                place(events_write, 4)
            });
        }
        let child = command.spawn().expect("the browser starts");
        // SAFETY: the descriptors are ours; the child has its own copies.
        let (to_browser, from_browser) = unsafe {
            libc::close(commands_read);
            libc::close(events_write);
            (
                File::from_raw_fd(commands_write),
                File::from_raw_fd(events_read),
            )
        };
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(from_browser);
            let mut message = Vec::new();
            while reader.read_until(0, &mut message).is_ok_and(|n| n > 0) {
                message.pop_if(|b| *b == 0);
                if let Ok(value) = json::parse(&String::from_utf8_lossy(&message)) {
                    if tx.send(value).is_err() {
                        break;
                    }
                }
                message.clear();
            }
        });
        Browser {
            child,
            to_browser,
            from_browser: rx,
            next_id: 0,
            events: Vec::new(),
            profile,
        }
    }

    /// Sends a command (to a page's session, or to the browser) and returns its result.
    fn call(&mut self, session: Option<&str>, method: &str, params: &str) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let session = session.map_or(String::new(), |s| {
            format!(",\"sessionId\":{}", json::to_compact(&Value::string(s)))
        });
        let message =
            format!("{{\"id\":{id},\"method\":\"{method}\",\"params\":{params}{session}}}\0");
        self.to_browser.write_all(message.as_bytes()).unwrap();
        let deadline = Instant::now() + PATIENCE;
        loop {
            let value = self.next_message(deadline, method);
            let o = value.as_object().unwrap();
            if o.get("id").and_then(Value::as_f64) == Some(id as f64) {
                if let Some(error) = o.get("error") {
                    panic!("{method}: {}", json::to_compact(error));
                }
                return o.get("result").cloned().unwrap_or(Value::Null);
            }
            self.events.push(value);
        }
    }

    /// The next message from the browser, waiting until `deadline` for what `awaited` needs.
    fn next_message(&self, deadline: Instant, awaited: &str) -> Value {
        let left = deadline.saturating_duration_since(Instant::now());
        self.from_browser
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("nothing for {awaited} within {PATIENCE:?}"))
    }

    /// Waits for the event `method` of `session`, keeping the others.
    fn wait_for(&mut self, session: &str, method: &str) {
        let is_it = |v: &Value| {
            let o = v.as_object().unwrap();
            o.get_str("method") == Some(method) && o.get_str("sessionId") == Some(session)
        };
        if self.events.iter().any(is_it) {
            return;
        }
        let deadline = Instant::now() + PATIENCE;
        loop {
            let value = self.next_message(deadline, method);
            let found = is_it(&value);
            self.events.push(value);
            if found {
                return;
            }
        }
    }

    /// Opens `file` in a new tab and waits until it has loaded (and a moment more, for
    /// anything it would load or run late).
    pub fn open(&mut self, file: &Path) -> Page {
        let url = format!("file://{}", file.display());
        let target = self.call(None, "Target.createTarget", r#"{"url":"about:blank"}"#);
        let target = target
            .as_object()
            .unwrap()
            .get_str("targetId")
            .unwrap()
            .to_owned();
        let attached = self.call(
            None,
            "Target.attachToTarget",
            &format!(
                "{{\"targetId\":{},\"flatten\":true}}",
                json::to_compact(&Value::string(target.as_str()))
            ),
        );
        let session = attached
            .as_object()
            .unwrap()
            .get_str("sessionId")
            .unwrap()
            .to_owned();
        for domain in ["Page", "Runtime", "Log", "Network"] {
            self.call(Some(&session), &format!("{domain}.enable"), "{}");
        }
        self.call(
            Some(&session),
            "Page.navigate",
            &format!(
                "{{\"url\":{}}}",
                json::to_compact(&Value::string(url.as_str()))
            ),
        );
        self.wait_for(&session, "Page.loadEventFired");
        // Anything late (a timer, a lazy image) is asked for within this evaluation's round
        // trip and a short wait (a fixed one: there is nothing to wait for but time).
        std::thread::sleep(Duration::from_millis(300));
        self.call(Some(&session), "Runtime.evaluate", r#"{"expression":"1"}"#);
        let mut page = Page {
            session: session.clone(),
            errors: Vec::new(),
            requests: Vec::new(),
        };
        for event in std::mem::take(&mut self.events) {
            let o = event.as_object().unwrap();
            if o.get_str("sessionId") != Some(session.as_str()) {
                continue;
            }
            let params = o.get("params").cloned().unwrap_or(Value::Null);
            let text = json::to_compact(&params);
            match o.get_str("method").unwrap_or_default() {
                "Runtime.exceptionThrown" => page.errors.push(text),
                "Runtime.consoleAPICalled" if text.contains("\"type\":\"error\"") => {
                    page.errors.push(text)
                }
                "Log.entryAdded" if text.contains("\"level\":\"error\"") => page.errors.push(text),
                "Network.requestWillBeSent" => {
                    let url = params
                        .as_object()
                        .and_then(|p| p.get("request"))
                        .and_then(Value::as_object)
                        .and_then(|r| r.get_str("url"))
                        .unwrap_or_default()
                        .to_owned();
                    page.requests.push(url);
                }
                _ => {}
            }
        }
        page
    }

    /// The value of a JavaScript expression in the page (returned by value).
    pub fn eval(&mut self, page: &Page, expression: &str) -> Value {
        let result = self.call(
            Some(&page.session),
            "Runtime.evaluate",
            &format!(
                "{{\"expression\":{},\"returnByValue\":true}}",
                json::to_compact(&Value::string(expression))
            ),
        );
        let result = result.as_object().unwrap().get("result").unwrap();
        result
            .as_object()
            .unwrap()
            .get("value")
            .cloned()
            .unwrap_or(Value::Null)
    }

    /// Renders `page` as for `media` (`screen` or `print`) and a reader who prefers the
    /// colour scheme `scheme` (`light` or `dark`).
    pub fn emulate(&mut self, page: &Page, media: &str, scheme: &str) {
        self.call(
            Some(&page.session),
            "Emulation.setEmulatedMedia",
            &format!(
                "{{\"media\":\"{media}\",\"features\":[{{\"name\":\"prefers-color-scheme\",\"value\":\"{scheme}\"}}]}}"
            ),
        );
    }

    /// A PNG screenshot of the whole page, kept under `target/tmp/screenshots/NAME.png`;
    /// returns its path.
    pub fn screenshot(&mut self, page: &Page, name: &str) -> PathBuf {
        let shot = self.call(
            Some(&page.session),
            "Page.captureScreenshot",
            r#"{"format":"png","captureBeyondViewport":false}"#,
        );
        let data = shot
            .as_object()
            .unwrap()
            .get_str("data")
            .unwrap()
            .to_owned();
        let bytes = data_encoding::BASE64.decode(data.as_bytes()).unwrap();
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, bytes).unwrap();
        path
    }
}

impl Drop for Browser {
    /// Kills the browser and its helper processes, then removes its profile (retrying
    /// while a dying helper may still write into it).
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // SAFETY: signals the process group the browser leads (made at spawn).
            unsafe { libc::kill(-pid, libc::SIGKILL) };
        }
        let _ = self.child.wait();
        for _ in 0..50 {
            match std::fs::remove_dir_all(self.profile.path()) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                _ => break,
            }
        }
    }
}
