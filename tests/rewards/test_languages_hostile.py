"""Hostile programs in every compiled language `io_tests` runs: what the sandbox guarantees holds
for C, C++, Go, Rust, Java and TypeScript as it does for Python.

Each attack is a small program written as a model would write it in that language, scored
through the public reward (`IoTests`), and each asserts the honest outcome: no network, no
state or process from one case in the next, no expected output on any disk the program can
read, no host file at compile time, limits that stop loops, memory hogs, compile-time bombs
and fork bombs, and an early "PASSED" that earns nothing. Every attack has a control that
shows the outcome is the sandbox's doing: the same program passing where the attack is
planted inside the job (or where the sandbox is off), or the right program passing under the
attack's reward options.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import socket
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from referee.rewards.code import IoTests
from referee.rollout import Rollout
from referee.scores import Score
from referee.verifiers.sandbox.local import bwrap_problem, isolation_problem
from referee.verifiers.sandbox.pool import WorkerPool
from tests.support.sandboxes import left_in_places, sandbox_processes

pytestmark = pytest.mark.skipif(
    isolation_problem() is not None, reason=f"no sandbox here: {isolation_problem()}"
)

LANGUAGES = ("c", "cpp", "go", "rust", "java", "typescript")


def _code(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def case(stdin: str, stdout: str) -> dict[str, str]:
    return {"stdin": stdin, "stdout": stdout}


def grade(language: str, code: str, cases: list[dict[str, str]], **options: Any) -> Score:
    """The completion's score; a skip where the sandbox lacks the language's toolchain."""
    reward = IoTests(language=language, **options)  # type: ignore[arg-type]
    completion = f"Here is my solution.\n```{language}\n{code}```\n"
    rollout = Rollout(prompt="solve it", completion=completion, reference={"cases": cases})
    s = reward.score_sync(rollout)
    if s.failure is not None:
        if "cannot build" in s.failure.message:
            pytest.skip(s.failure.message)
        pytest.fail(f"the reward failed instead of scoring: {s.failure}")
    print(f"[{language}] {s.value} {s.reason}")  # the verdicts, for -s
    return s


def no_sandbox_processes() -> list[int]:
    """The sandbox uids' live processes on the host, given a moment to be reaped."""
    for _ in range(20):
        left = sandbox_processes()
        if not left:
            break
        time.sleep(0.1)
    return left


# --- the right program, and the reward options each attack runs under ---------------------

SUM = {
    "c": _code("""
        #include <stdio.h>
        int main(void) {
          long long a, b;
          while (scanf("%lld %lld", &a, &b) == 2) printf("%lld\\n", a + b);
          return 0;
        }
    """),
    "cpp": _code("""
        #include <iostream>
        int main() {
          long long a, b;
          while (std::cin >> a >> b) std::cout << a + b << "\\n";
        }
    """),
    "go": _code("""
        package main

        import "fmt"

        func main() {
            var a, b int64
            for {
                if _, err := fmt.Scan(&a, &b); err != nil {
                    return
                }
                fmt.Println(a + b)
            }
        }
    """),
    "rust": _code("""
        use std::io::Read;
        fn main() {
            let mut s = String::new();
            std::io::stdin().read_to_string(&mut s).unwrap();
            let v: Vec<i64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();
            for p in v.chunks(2) {
                println!("{}", p[0] + p[1]);
            }
        }
    """),
    "java": _code("""
        import java.util.Scanner;

        public class Main {
          public static void main(String[] args) {
            Scanner in = new Scanner(System.in);
            while (in.hasNextLong()) System.out.println(in.nextLong() + in.nextLong());
          }
        }
    """),
    "typescript": _code("""
        const text: string = require("fs").readFileSync(0, "utf8");
        const v: number[] = text.split(/\\s+/).filter((t) => t).map(Number);
        for (let i = 0; i < v.length; i += 2) console.log(v[i] + v[i + 1]);
    """),
}
SUM_CASES = [case("1 2\n", "3\n"), case("5 6\n7 8\n", "11\n15\n")]

OPTIONS: dict[str, dict[str, Any]] = {
    "network": {"timeout": 8},
    "state": {"timeout": 5},
    "background": {"timeout": 6},
    "search": {"timeout": 10},
    "loop": {"timeout": 1, "stop_on_failure": True},
    # a generous time limit: on a loaded machine a runtime filling memory can hit the
    # default one first, and the verdict under test is the memory limit
    "memory": {"memory_mb": 256, "timeout": 20, "stop_on_failure": True},
    "early_exit": {"timeout": 5},
    "compile_read": {"timeout": 5},
    "compile_bomb": {"compile_timeout": 5},
    "fork_bomb": {"timeout": 2, "stop_on_failure": True},
}

# Go's runtime reserves about 700 MiB of address space before main, node's V8 about 716 MiB
# (its code range): their address space gets RUNTIME_RESERVE_MB over memory_mb, so that the
# right program starts under memory_mb 256 (it did not, before that reserve).
MANAGED = ("go", "java", "typescript")


def _control_params() -> list[Any]:
    params = []
    for language in LANGUAGES:
        for attack in OPTIONS:
            params.append(pytest.param(language, attack, id=f"{language}-{attack}"))
    return params


@pytest.mark.parametrize(("language", "attack"), _control_params())
def test_the_right_program_passes_under_each_attacks_options(language: str, attack: str) -> None:
    s = grade(language, SUM[language], SUM_CASES, **OPTIONS[attack])
    assert s.value == 1.0, s.reason
    assert s.components == {"passed": 2.0, "cases": 2.0}


# --- 1. the network ------------------------------------------------------------------------

# Each line of stdin is "host port"; "connected" once any connection is made.
NETWORK = {
    "c": _code("""
        #include <arpa/inet.h>
        #include <stdio.h>
        #include <sys/socket.h>
        #include <sys/time.h>
        #include <unistd.h>
        int main(void) {
          char host[64];
          int port;
          while (scanf("%63s %d", host, &port) == 2) {
            int s = socket(AF_INET, SOCK_STREAM, 0);
            struct timeval tv = {1, 0};
            struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
            inet_pton(AF_INET, host, &a.sin_addr);
            setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
            if (s >= 0 && connect(s, (struct sockaddr *)&a, sizeof a) == 0) {
              puts("connected");
              return 0;
            }
            close(s);
          }
          puts("refused");
          return 0;
        }
    """),
    "cpp": _code("""
        #include <arpa/inet.h>
        #include <sys/socket.h>
        #include <sys/time.h>
        #include <unistd.h>
        #include <iostream>
        #include <string>
        int main() {
          std::string host;
          int port;
          while (std::cin >> host >> port) {
            int s = socket(AF_INET, SOCK_STREAM, 0);
            timeval tv{1, 0};
            setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
            sockaddr_in a{};
            a.sin_family = AF_INET;
            a.sin_port = htons(port);
            inet_pton(AF_INET, host.c_str(), &a.sin_addr);
            if (connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
              std::cout << "connected\\n";
              return 0;
            }
            close(s);
          }
          std::cout << "refused\\n";
        }
    """),
    "go": _code("""
        package main

        import (
            "fmt"
            "net"
            "time"
        )

        func main() {
            var host, port string
            for {
                if _, err := fmt.Scan(&host, &port); err != nil {
                    break
                }
                addr := net.JoinHostPort(host, port)
                if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
                    c.Close()
                    fmt.Println("connected")
                    return
                }
            }
            fmt.Println("refused")
        }
    """),
    "rust": _code("""
        use std::io::Read;
        use std::net::{SocketAddr, TcpStream};
        use std::time::Duration;

        fn main() {
            let mut input = String::new();
            std::io::stdin().read_to_string(&mut input).unwrap();
            for line in input.lines() {
                if let Ok(addr) = line.trim().replace(' ', ":").parse::<SocketAddr>() {
                    if TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok() {
                        println!("connected");
                        return;
                    }
                }
            }
            println!("refused");
        }
    """),
    "java": _code("""
        import java.net.InetSocketAddress;
        import java.net.Socket;
        import java.util.Scanner;

        public class Main {
          public static void main(String[] args) {
            Scanner in = new Scanner(System.in);
            while (in.hasNext()) {
              String host = in.next();
              int port = in.nextInt();
              try (Socket s = new Socket()) {
                s.connect(new InetSocketAddress(host, port), 1000);
                System.out.println("connected");
                return;
              } catch (Exception e) {
                // refused, unreachable or timed out: the next one
              }
            }
            System.out.println("refused");
          }
        }
    """),
    "typescript": _code("""
        import * as fs from "fs";
        import * as net from "net";

        function reach(host: string, port: number): Promise<boolean> {
          return new Promise((resolve) => {
            const s = net.connect({ host, port, timeout: 1000 });
            s.on("connect", () => { s.destroy(); resolve(true); });
            s.on("error", () => resolve(false));
            s.on("timeout", () => { s.destroy(); resolve(false); });
          });
        }

        (async () => {
          for (const line of fs.readFileSync(0, "utf8").trim().split("\\n")) {
            const [host, port] = line.split(" ");
            if (await reach(host, Number(port))) {
              console.log("connected");
              return;
            }
          }
          console.log("refused");
        })();
    """),
}


class Listener:
    """A TCP server on every host address, counting the connections it accepts."""

    def __init__(self) -> None:
        self.server = socket.create_server(("0.0.0.0", 0))
        self.server.settimeout(0.2)
        self.port = self.server.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError):
                conn, _ = self.server.accept()
                self.accepted += 1
                conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.server.close()


def _host_address() -> str | None:
    """This host's address on its default route (no packet is sent), where it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
            address: str = probe.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") else address


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.close()


def _targets(port: int) -> str:
    lines = [f"127.0.0.1 {port}"]
    if (address := _host_address()) is not None:
        lines.append(f"{address} {port}")
    lines.append("1.1.1.1 53")  # the internet, last: it may not answer at all
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("language", LANGUAGES)
def test_no_network(language: str, listener: Listener) -> None:
    # The host listens on every address; the program is told where and still reaches nothing.
    s = grade(language, NETWORK[language], [case(_targets(listener.port), "connected\n")],
              **OPTIONS["network"])  # fmt: skip
    assert s.value == 0.0, s.reason
    assert "wrong answer: 'refused'" in s.reason
    assert listener.accepted == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="isolation none drops to a slot uid only as root")
@pytest.mark.parametrize("language", LANGUAGES)
def test_the_network_program_connects_where_the_sandbox_is_off(
    language: str, listener: Listener
) -> None:
    # The control: the same program, with isolation off, reaches the host's listener.
    s = grade(language, NETWORK[language], [case(_targets(listener.port), "connected\n")],
              isolation="none", **OPTIONS["network"])  # fmt: skip
    assert s.value == 1.0, s.reason
    assert listener.accepted >= 1


# --- 2. state across cases -----------------------------------------------------------------

# "write": leave a file in every writable place; then "found" if any such file is there.
STATE = {
    "c": _code("""
        #include <stdio.h>
        #include <stdlib.h>
        #include <string.h>
        int main(void) {
          const char *home = getenv("HOME");
          const char *dirs[] = {".", "/tmp", "/var/tmp", "/dev/shm", home ? home : "."};
          char mode[16] = "", path[512];
          int found = 0;
          if (scanf("%15s", mode) != 1) return 1;
          for (int i = 0; i < 5; i++) {
            snprintf(path, sizeof path, "%s/left-behind", dirs[i]);
            FILE *f = strcmp(mode, "write") == 0 ? fopen(path, "w") : NULL;
            if (f) fclose(f);
            if ((f = fopen(path, "r"))) {
              found = 1;
              fclose(f);
            }
          }
          puts(found ? "found" : "clean");
          return 0;
        }
    """),
    "cpp": _code("""
        #include <cstdlib>
        #include <fstream>
        #include <iostream>
        #include <string>
        int main() {
          const char* home = std::getenv("HOME");
          std::string mode, dirs[] = {".", "/tmp", "/var/tmp", "/dev/shm", home ? home : "."};
          std::cin >> mode;
          bool found = false;
          for (const auto& dir : dirs) {
            if (mode == "write") std::ofstream(dir + "/left-behind") << "x";
            found = found || std::ifstream(dir + "/left-behind").good();
          }
          std::cout << (found ? "found" : "clean") << "\\n";
        }
    """),
    "go": _code("""
        package main

        import (
            "fmt"
            "os"
            "path/filepath"
        )

        func main() {
            var mode string
            fmt.Scan(&mode)
            found := false
            for _, dir := range []string{".", "/tmp", "/var/tmp", "/dev/shm", os.Getenv("HOME")} {
                path := filepath.Join(dir, "left-behind")
                if mode == "write" {
                    os.WriteFile(path, []byte("x"), 0o644)
                }
                if _, err := os.Stat(path); err == nil {
                    found = true
                }
            }
            if found {
                fmt.Println("found")
            } else {
                fmt.Println("clean")
            }
        }
    """),
    "rust": _code("""
        use std::{env, fs, io, path::Path};

        fn main() {
            let mut mode = String::new();
            io::stdin().read_line(&mut mode).unwrap();
            let home = env::var("HOME").unwrap_or_else(|_| ".".into());
            let mut found = false;
            for dir in [".", "/tmp", "/var/tmp", "/dev/shm", home.as_str()] {
                let path = Path::new(dir).join("left-behind");
                if mode.trim() == "write" {
                    let _ = fs::write(&path, "x");
                }
                found |= path.exists();
            }
            println!("{}", if found { "found" } else { "clean" });
        }
    """),
    "java": _code("""
        import java.nio.file.Files;
        import java.nio.file.Path;
        import java.util.Scanner;

        public class Main {
          public static void main(String[] args) {
            String mode = new Scanner(System.in).next();
            boolean found = false;
            String home = System.getenv().getOrDefault("HOME", ".");
            for (String dir : new String[] {".", "/tmp", "/var/tmp", "/dev/shm", home}) {
              Path path = Path.of(dir, "left-behind");
              try {
                if (mode.equals("write")) Files.writeString(path, "x");
              } catch (Exception e) {
                // not writable: the next place
              }
              found |= Files.exists(path);
            }
            System.out.println(found ? "found" : "clean");
          }
        }
    """),
    "typescript": _code("""
        import * as fs from "fs";
        import * as os from "os";

        const mode = fs.readFileSync(0, "utf8").trim();
        let found = false;
        for (const dir of [".", "/tmp", "/var/tmp", "/dev/shm", os.homedir()]) {
          const path = `${dir}/left-behind`;
          if (mode === "write") {
            try { fs.writeFileSync(path, "x"); } catch { /* the next place */ }
          }
          found = found || fs.existsSync(path);
        }
        console.log(found ? "found" : "clean");
    """),
}


@pytest.mark.parametrize("language", LANGUAGES)
def test_no_file_survives_into_the_next_case(language: str) -> None:
    # Case 1 writes and finds its own files (the control); case 2 finds none of them.
    cases = [case("write\n", "found\n"), case("look\n", "found\n")]
    s = grade(language, STATE[language], cases, **OPTIONS["state"])
    assert s.components == {"passed": 1.0, "cases": 2.0}, s.reason
    assert s.value == 0.5
    assert "case 2: wrong answer: 'clean'" in s.reason
    box = IoTests().open_sandbox()  # the process's shared sandbox: the one the cases ran on
    assert isinstance(box, WorkerPool)
    if os.geteuid() == 0:  # looking into its idle workers from the host: all empty
        assert left_in_places(box) == {}


# --- 3. a process that outlives its case ---------------------------------------------------

# "spawn": start a detached child that marks /tmp and the work dir, then lives on; exit at once.
# "self": the same, then look. "look": after a second, "found" if a marker is there or any
# process's command line says "sleep".
CHILD = "sleep 0.3; touch /tmp/bg-marker bg-marker; sleep 5"
BACKGROUND = {
    "c": _code(f"""
        #define _GNU_SOURCE
        #include <dirent.h>
        #include <stdio.h>
        #include <string.h>
        #include <unistd.h>
        static int sleeper(void) {{
          DIR *d = opendir("/proc");
          int found = 0;
          for (struct dirent *e; d && (e = readdir(d));) {{
            char path[300], cmd[256];
            snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
            FILE *f = fopen(path, "r");
            if (!f) continue;
            size_t n = fread(cmd, 1, sizeof cmd, f);
            fclose(f);
            found |= memmem(cmd, n, "sleep", 5) != NULL;
          }}
          if (d) closedir(d);
          return found;
        }}
        int main(void) {{
          char mode[16] = "";
          if (scanf("%15s", mode) != 1) return 1;
          if (strcmp(mode, "look") != 0 && fork() == 0) {{
            setsid();
            execl("/bin/sh", "sh", "-c", "{CHILD}", (char *)0);
            _exit(1);
          }}
          if (strcmp(mode, "spawn") == 0) {{
            puts("spawned");
            return 0;
          }}
          sleep(1);
          int marked = access("/tmp/bg-marker", F_OK) == 0 || access("bg-marker", F_OK) == 0;
          puts(marked || sleeper() ? "found" : "clean");
          return 0;
        }}
    """),
    "cpp": _code(f"""
        #include <unistd.h>
        #include <chrono>
        #include <filesystem>
        #include <fstream>
        #include <iostream>
        #include <iterator>
        #include <string>
        #include <thread>
        namespace fs = std::filesystem;
        int main() {{
          std::string mode;
          std::cin >> mode;
          if (mode != "look" && fork() == 0) {{
            setsid();
            execl("/bin/sh", "sh", "-c", "{CHILD}", nullptr);
            _exit(1);
          }}
          if (mode == "spawn") {{
            std::cout << "spawned\\n";
            return 0;
          }}
          std::this_thread::sleep_for(std::chrono::seconds(1));
          bool found = fs::exists("/tmp/bg-marker") || fs::exists("bg-marker");
          for (const auto& entry : fs::directory_iterator("/proc")) {{
            std::ifstream in(entry.path() / "cmdline");
            std::string cmd(std::istreambuf_iterator<char>(in), {{}});
            found = found || cmd.find("sleep") != std::string::npos;
          }}
          std::cout << (found ? "found" : "clean") << "\\n";
        }}
    """),
    "go": _code(f"""
        package main

        import (
            "fmt"
            "os"
            "os/exec"
            "path/filepath"
            "strings"
            "syscall"
            "time"
        )

        func main() {{
            var mode string
            fmt.Scan(&mode)
            if mode != "look" {{
                child := exec.Command("sh", "-c", "{CHILD}")
                child.SysProcAttr = &syscall.SysProcAttr{{Setsid: true}}
                child.Start()
            }}
            if mode == "spawn" {{
                fmt.Println("spawned")
                return
            }}
            time.Sleep(time.Second)
            found := false
            for _, p := range []string{{"/tmp/bg-marker", "bg-marker"}} {{
                if _, err := os.Stat(p); err == nil {{
                    found = true
                }}
            }}
            cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
            for _, p := range cmdlines {{
                cmd, _ := os.ReadFile(p)
                found = found || strings.Contains(string(cmd), "sleep")
            }}
            if found {{
                fmt.Println("found")
            }} else {{
                fmt.Println("clean")
            }}
        }}
    """),
    "rust": _code(f"""
        use std::process::{{Command, Stdio}};
        use std::{{fs, io, path::Path, thread, time::Duration}};

        fn main() {{
            let mut mode = String::new();
            io::stdin().read_line(&mut mode).unwrap();
            let mode = mode.trim();
            if mode != "look" {{
                Command::new("sh")
                    .args(["-c", "{CHILD}"])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap();
            }}
            if mode == "spawn" {{
                println!("spawned");
                return;
            }}
            thread::sleep(Duration::from_secs(1));
            let mut found = ["/tmp/bg-marker", "bg-marker"].iter().any(|p| Path::new(p).exists());
            for entry in fs::read_dir("/proc").unwrap().flatten() {{
                if let Ok(cmd) = fs::read(entry.path().join("cmdline")) {{
                    found |= String::from_utf8_lossy(&cmd).contains("sleep");
                }}
            }}
            println!("{{}}", if found {{ "found" }} else {{ "clean" }});
        }}
    """),
    "java": _code(f"""
        import java.nio.file.Files;
        import java.nio.file.Path;
        import java.util.Scanner;

        public class Main {{
          public static void main(String[] args) throws Exception {{
            String mode = new Scanner(System.in).next();
            if (!mode.equals("look")) {{
              new ProcessBuilder("sh", "-c", "{CHILD}")
                  .redirectOutput(ProcessBuilder.Redirect.DISCARD)
                  .redirectError(ProcessBuilder.Redirect.DISCARD)
                  .start();
            }}
            if (mode.equals("spawn")) {{
              System.out.println("spawned");
              return;
            }}
            Thread.sleep(1000);
            boolean found = Files.exists(Path.of("/tmp/bg-marker"));
            found |= Files.exists(Path.of("bg-marker"));
            found |= ProcessHandle.allProcesses()
                .anyMatch(p -> p.info().commandLine().orElse("").contains("sleep"));
            System.out.println(found ? "found" : "clean");
          }}
        }}
    """),
    "typescript": _code(f"""
        import {{ spawn }} from "child_process";
        import * as fs from "fs";

        const mode = fs.readFileSync(0, "utf8").trim();
        if (mode !== "look") {{
          spawn("sh", ["-c", "{CHILD}"], {{ detached: true, stdio: "ignore" }}).unref();
        }}
        if (mode === "spawn") {{
          console.log("spawned");
        }} else {{
          setTimeout(() => {{
            let found = ["/tmp/bg-marker", "bg-marker"].some((p) => fs.existsSync(p));
            for (const pid of fs.readdirSync("/proc").filter((d) => /^\\d+$/.test(d))) {{
              try {{
                const cmd = fs.readFileSync(`/proc/${{pid}}/cmdline`, "utf8");
                found = found || cmd.includes("sleep");
              }} catch {{
                // gone meanwhile
              }}
            }}
            console.log(found ? "found" : "clean");
          }}, 1000);
        }}
    """),
}


@pytest.mark.parametrize("language", LANGUAGES)
def test_no_process_outlives_its_case(language: str) -> None:
    # Case 1 spawns a child and finds it (the control); case 2 spawns one and leaves at once;
    # case 3 looks for that child, or what it wrote, and finds neither.
    cases = [case("self\n", "found\n"), case("spawn\n", "spawned\n"), case("look\n", "found\n")]
    s = grade(language, BACKGROUND[language], cases, **OPTIONS["background"])
    assert s.components == {"passed": 2.0, "cases": 3.0}, s.reason
    assert "case 3: wrong answer: 'clean'" in s.reason
    assert no_sandbox_processes() == []  # seen from the host: every child is gone


# --- 4. the expected output on some disk ---------------------------------------------------

# The expected output of the search case; it is in this file, on the host, and in the
# reference in this process, never in the sandbox.
EXPECTED = "EXPECTED-7f3a9"

# "plant SUFFIX" first writes EXPECTED-SUFFIX into a file deep in /tmp (the control). Then it
# searches /tmp, /dev/shm, /work (its HOME), the whole tree (/proc, /sys, /dev and the
# read-only /usr aside) and every process's environment and command line for "EXPECTED-" and
# five hex digits, and prints the first it finds, else "nothing".
SEARCH = {
    "c": _code("""
        #define _GNU_SOURCE
        #include <ctype.h>
        #include <dirent.h>
        #include <ftw.h>
        #include <stdio.h>
        #include <string.h>
        #include <sys/stat.h>
        static char buf[1 << 20];
        static int scan(const char *path) {
          FILE *f = fopen(path, "rb");
          if (!f) return 0;
          size_t n = fread(buf, 1, sizeof buf, f);
          fclose(f);
          for (char *p = buf; (p = memmem(p, n - (p - buf), "EXPECTED-", 9)); p++) {
            size_t left = n - (p - buf) - 9;
            int ok = left >= 5;
            for (int i = 0; ok && i < 5; i++) ok = p[9 + i] && strchr("0123456789abcdef", p[9 + i]);
            if (ok && (left == 5 || !isalnum((unsigned char)p[14]))) {
              printf("%.14s\\n", p);
              return 1;
            }
          }
          return 0;
        }
        static int visit(const char *path, const struct stat *st, int type, struct FTW *at) {
          const char *name = path + at->base;
          if (type == FTW_D && at->level == 1 && (!strcmp(name, "proc") || !strcmp(name, "sys") ||
                                                  !strcmp(name, "usr") || !strcmp(name, "dev")))
            return FTW_SKIP_SUBTREE;
          return type == FTW_F && S_ISREG(st->st_mode) && scan(path) ? FTW_STOP : FTW_CONTINUE;
        }
        int main(void) {
          char mode[16] = "", suffix[16] = "";
          if (scanf("%15s %15s", mode, suffix) == 2) {
            mkdir("/tmp/a", 0755);
            mkdir("/tmp/a/b", 0755);
            FILE *f = fopen("/tmp/a/b/notes.txt", "w");
            fprintf(f, "notes: EXPECTED-%s.\\n", suffix);
            fclose(f);
          }
          const char *roots[] = {"/tmp", "/dev/shm", "/work", "/"};
          for (int i = 0; i < 4; i++)
            if (nftw(roots[i], visit, 32, FTW_PHYS | FTW_ACTIONRETVAL) == FTW_STOP) return 0;
          DIR *d = opendir("/proc");
          for (struct dirent *e; d && (e = readdir(d));) {
            char path[300];
            snprintf(path, sizeof path, "/proc/%s/environ", e->d_name);
            if (scan(path)) return 0;
            snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
            if (scan(path)) return 0;
          }
          puts("nothing");
          return 0;
        }
    """),
    "cpp": _code("""
        #include <cctype>
        #include <filesystem>
        #include <fstream>
        #include <iostream>
        #include <string>
        namespace fs = std::filesystem;

        static bool scan(const fs::path& path) {
          std::ifstream in(path, std::ios::binary);
          std::string text(1 << 20, '\\0');
          in.read(&text[0], text.size());
          text.resize(in.gcount());
          for (auto at = text.find("EXPECTED-"); at != std::string::npos;
               at = text.find("EXPECTED-", at + 1)) {
            std::string tail = text.substr(at + 9, 6);
            if (tail.size() >= 5 && tail.find_first_not_of("0123456789abcdef") >= 5 &&
                (tail.size() == 5 || !std::isalnum(static_cast<unsigned char>(tail[5])))) {
              std::cout << text.substr(at, 14) << "\\n";
              return true;
            }
          }
          return false;
        }

        static bool walk(const fs::path& root) {
          std::error_code ec;
          auto it = fs::recursive_directory_iterator(
              root, fs::directory_options::skip_permission_denied, ec);
          for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
            const fs::path& p = it->path();
            if (p == "/proc" || p == "/sys" || p == "/usr" || p == "/dev") {
              it.disable_recursion_pending();
            } else if (it->is_regular_file(ec) && !it->is_symlink(ec) && scan(p)) {
              return true;
            }
          }
          return false;
        }

        int main() {
          std::string mode, suffix;
          std::cin >> mode >> suffix;
          if (mode == "plant") {
            fs::create_directories("/tmp/a/b");
            std::ofstream("/tmp/a/b/notes.txt") << "notes: EXPECTED-" << suffix << ".\\n";
          }
          for (const char* root : {"/tmp", "/dev/shm", "/work", "/"})
            if (walk(root)) return 0;
          for (const auto& entry : fs::directory_iterator("/proc"))
            if (scan(entry.path() / "environ") || scan(entry.path() / "cmdline")) return 0;
          std::cout << "nothing\\n";
        }
    """),
    "go": _code("""
        package main

        import (
            "errors"
            "fmt"
            "io"
            "io/fs"
            "os"
            "path/filepath"
            "regexp"
        )

        var expected = regexp.MustCompile(`EXPECTED-[0-9a-f]{5}([^0-9A-Za-z]|$)`)
        var errFound = errors.New("found")

        func scan(path string) bool {
            f, err := os.Open(path)
            if err != nil {
                return false
            }
            defer f.Close()
            buf := make([]byte, 1<<20)
            n, _ := io.ReadFull(f, buf)
            if m := expected.Find(buf[:n]); m != nil {
                fmt.Println(string(m[:14]))
                return true
            }
            return false
        }

        func main() {
            var mode, suffix string
            fmt.Scan(&mode, &suffix)
            if mode == "plant" {
                os.MkdirAll("/tmp/a/b", 0o755)
                os.WriteFile("/tmp/a/b/notes.txt", []byte("notes: EXPECTED-"+suffix+".\\n"), 0o644)
            }
            skip := map[string]bool{"/proc": true, "/sys": true, "/usr": true, "/dev": true}
            for _, root := range []string{"/tmp", "/dev/shm", "/work", "/"} {
                err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
                    if err != nil {
                        return nil
                    }
                    if d.IsDir() && skip[path] {
                        return filepath.SkipDir
                    }
                    if d.Type().IsRegular() && scan(path) {
                        return errFound
                    }
                    return nil
                })
                if err == errFound {
                    return
                }
            }
            procs, _ := filepath.Glob("/proc/[0-9]*")
            for _, p := range procs {
                if scan(p+"/environ") || scan(p+"/cmdline") {
                    return
                }
            }
            fmt.Println("nothing")
        }
    """),
    "rust": _code("""
        use std::fs;
        use std::io::Read;
        use std::path::Path;

        fn scan(path: &Path) -> bool {
            let mut buf = Vec::new();
            if let Ok(f) = fs::File::open(path) {
                let _ = f.take(1 << 20).read_to_end(&mut buf);
            }
            let hex = |b: &u8| b"0123456789abcdef".contains(b);
            for at in 0..buf.len().saturating_sub(13) {
                if buf[at..].starts_with(b"EXPECTED-")
                    && buf[at + 9..at + 14].iter().all(hex)
                    && buf.get(at + 14).map_or(true, |b| !b.is_ascii_alphanumeric())
                {
                    println!("{}", String::from_utf8_lossy(&buf[at..at + 14]));
                    return true;
                }
            }
            false
        }

        fn walk(dir: &Path) -> bool {
            let skip = ["/proc", "/sys", "/usr", "/dev"];
            match fs::read_dir(dir) {
                Err(_) => false,
                Ok(entries) => entries.flatten().any(|e| {
                    let path = e.path();
                    match e.file_type() {
                        Ok(t) if t.is_dir() => {
                            !skip.iter().any(|s| path == Path::new(s)) && walk(&path)
                        }
                        Ok(t) if t.is_file() => scan(&path),
                        _ => false,
                    }
                }),
            }
        }

        fn main() {
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).unwrap();
            let words: Vec<&str> = line.split_whitespace().collect();
            if words.len() == 2 && words[0] == "plant" {
                fs::create_dir_all("/tmp/a/b").unwrap();
                let notes = format!("notes: EXPECTED-{}.\\n", words[1]);
                fs::write("/tmp/a/b/notes.txt", notes).unwrap();
            }
            if ["/tmp", "/dev/shm", "/work", "/"].iter().any(|r| walk(Path::new(r))) {
                return;
            }
            for e in fs::read_dir("/proc").unwrap().flatten() {
                if scan(&e.path().join("environ")) || scan(&e.path().join("cmdline")) {
                    return;
                }
            }
            println!("nothing");
        }
    """),
    "java": _code("""
        import java.io.IOException;
        import java.io.InputStream;
        import java.nio.charset.StandardCharsets;
        import java.nio.file.*;
        import java.nio.file.attribute.BasicFileAttributes;
        import java.util.List;
        import java.util.Scanner;
        import java.util.Set;
        import java.util.regex.Matcher;
        import java.util.regex.Pattern;

        public class Main {
          static final Pattern EXPECTED = Pattern.compile("EXPECTED-[0-9a-f]{5}(?![0-9A-Za-z])");

          static boolean scan(Path path) {
            try (InputStream in = Files.newInputStream(path)) {
              String text = new String(in.readNBytes(1 << 20), StandardCharsets.ISO_8859_1);
              Matcher m = EXPECTED.matcher(text);
              if (!m.find()) return false;
              System.out.println(m.group());
              return true;
            } catch (IOException e) {
              return false;
            }
          }

          public static void main(String[] args) throws IOException {
            String[] words = new Scanner(System.in).nextLine().trim().split(" ");
            if (words[0].equals("plant")) {
              Files.createDirectories(Path.of("/tmp/a/b"));
              String notes = "notes: EXPECTED-" + words[1] + ".\\n";
              Files.writeString(Path.of("/tmp/a/b/notes.txt"), notes);
            }
            Set<Path> skip =
                Set.of(Path.of("/proc"), Path.of("/sys"), Path.of("/usr"), Path.of("/dev"));
            boolean[] found = {false};
            for (String root : List.of("/tmp", "/dev/shm", "/work", "/")) {
              Files.walkFileTree(Path.of(root), new SimpleFileVisitor<Path>() {
                @Override
                public FileVisitResult preVisitDirectory(Path dir, BasicFileAttributes a) {
                  if (skip.contains(dir)) return FileVisitResult.SKIP_SUBTREE;
                  return FileVisitResult.CONTINUE;
                }

                @Override
                public FileVisitResult visitFile(Path file, BasicFileAttributes a) {
                  found[0] = a.isRegularFile() && scan(file);
                  return found[0] ? FileVisitResult.TERMINATE : FileVisitResult.CONTINUE;
                }

                @Override
                public FileVisitResult visitFileFailed(Path file, IOException e) {
                  return FileVisitResult.CONTINUE;
                }
              });
              if (found[0]) return;
            }
            try (DirectoryStream<Path> ps = Files.newDirectoryStream(Path.of("/proc"), "[0-9]*")) {
              for (Path p : ps) {
                if (scan(p.resolve("environ")) || scan(p.resolve("cmdline"))) return;
              }
            }
            System.out.println("nothing");
          }
        }
    """),
    "typescript": _code("""
        import * as fs from "fs";
        import * as path from "path";

        const EXPECTED = /EXPECTED-[0-9a-f]{5}(?![0-9A-Za-z])/;
        const SKIP = new Set(["/proc", "/sys", "/usr", "/dev"]);

        function scan(file: string): boolean {
          let text = "";
          try {
            const fd = fs.openSync(file, "r");
            const buf = Buffer.alloc(1 << 20);
            text = buf.toString("latin1", 0, fs.readSync(fd, buf, 0, buf.length, null));
            fs.closeSync(fd);
          } catch {
            return false;
          }
          const m = EXPECTED.exec(text);
          if (m) console.log(m[0]);
          return m !== null;
        }

        function walk(dir: string): boolean {
          let entries: fs.Dirent[];
          try {
            entries = fs.readdirSync(dir, { withFileTypes: true });
          } catch {
            return false;
          }
          return entries.some((e) => {
            const p = path.join(dir, e.name);
            if (e.isDirectory()) return !SKIP.has(p) && walk(p);
            return e.isFile() && scan(p);
          });
        }

        const [mode, suffix] = fs.readFileSync(0, "utf8").trim().split(/\\s+/);
        if (mode === "plant") {
          fs.mkdirSync("/tmp/a/b", { recursive: true });
          fs.writeFileSync("/tmp/a/b/notes.txt", `notes: EXPECTED-${suffix}.\\n`);
        }
        const procs = fs.readdirSync("/proc").filter((d) => /^\\d+$/.test(d));
        const found = ["/tmp", "/dev/shm", "/work", "/"].some(walk) ||
          procs.some((p) => scan(`/proc/${p}/environ`) || scan(`/proc/${p}/cmdline`));
        if (!found) console.log("nothing");
    """),
}


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_expected_output_is_on_no_disk_the_program_reads(language: str) -> None:
    if bwrap_problem() is not None:
        # As test_code's forgeries: the filesystem attack needs bubblewrap's mount namespace.
        pytest.skip(f"needs bubblewrap's filesystem isolation: {bwrap_problem()}")
    # Case 1 plants the string itself and the search finds it (the control); case 2 searches
    # everything it can read and finds nothing.
    suffix = EXPECTED.split("-")[1]
    cases = [case(f"plant {suffix}\n", EXPECTED + "\n"), case("search\n", EXPECTED + "\n")]
    s = grade(language, SEARCH[language], cases, **OPTIONS["search"])
    assert s.components == {"passed": 1.0, "cases": 2.0}, s.reason
    assert "case 2: wrong answer: 'nothing'" in s.reason


# --- 5. an infinite loop -------------------------------------------------------------------

LOOP = {
    "c": "int main(void) {\n  volatile unsigned long x = 0;\n  for (;;) x++;\n}\n",
    "cpp": "int main() {\n  volatile unsigned long x = 0;\n  for (;;) x++;\n}\n",
    "go": "package main\n\nfunc main() {\n\tx := 0\n\tfor {\n\t\tx++\n\t}\n}\n",
    "rust": "fn main() {\n    let mut x: u64 = 0;\n    loop {\n        x = x.wrapping_add(1);\n"
    '        if x == 0 {\n            println!("{x}");\n        }\n    }\n}\n',
    "java": "public class Main {\n  public static void main(String[] args) {\n    long x = 0;\n"
    "    while (true) x++;\n  }\n}\n",
    "typescript": "let x = 0;\nwhile (true) x++;\n",
}


@pytest.mark.parametrize("language", LANGUAGES)
def test_an_infinite_loop_is_a_time_limit(language: str) -> None:
    started = time.monotonic()
    s = grade(language, LOOP[language], SUM_CASES, **OPTIONS["loop"])
    assert s.value == 0.0, s.reason
    assert "case 1: time limit" in s.reason
    assert time.monotonic() - started < 20  # a build and one second: not the loop's pace


# --- 6. a memory hog -----------------------------------------------------------------------

# 64 blocks of 64 MiB, every byte written, all kept: 4 GiB.
MEMORY = {
    "c": _code("""
        #include <stdio.h>
        #include <stdlib.h>
        #include <string.h>
        static char *keep[64];
        int main(void) {
          for (int i = 0; i < 64; i++) {
            keep[i] = malloc(64 << 20);
            memset(keep[i], 1, 64 << 20);
          }
          printf("%d\\n", keep[63][0]);
          return 0;
        }
    """),
    "cpp": _code("""
        #include <iostream>
        #include <vector>
        int main() {
          std::vector<std::vector<char>> keep;
          for (int i = 0; i < 64; i++) keep.emplace_back(64 << 20, 1);
          std::cout << keep.size() << "\\n";
        }
    """),
    "go": _code("""
        package main

        import "fmt"

        func main() {
            var keep [][]byte
            for i := 0; i < 64; i++ {
                b := make([]byte, 64<<20)
                for j := range b {
                    b[j] = 1
                }
                keep = append(keep, b)
            }
            fmt.Println(len(keep))
        }
    """),
    "rust": _code("""
        fn main() {
            let mut keep = Vec::new();
            for _ in 0..64 {
                keep.push(vec![1u8; 64 << 20]);
            }
            println!("{}", keep.len());
        }
    """),
    "java": _code("""
        import java.util.ArrayList;
        import java.util.Arrays;
        import java.util.List;

        public class Main {
          public static void main(String[] args) {
            List<byte[]> keep = new ArrayList<>();
            for (int i = 0; i < 64; i++) {
              byte[] block = new byte[64 << 20];
              Arrays.fill(block, (byte) 1);
              keep.add(block);
            }
            System.out.println(keep.size());
          }
        }
    """),
    "typescript": _code("""
        const keep: number[][] = [];
        for (let i = 0; i < 64; i++) keep.push(new Array(8 << 20).fill(1.5));
        console.log(keep.length);
    """),
}

# glibc's malloc returns NULL under the address-space limit and says nothing; the program
# then dies of SIGSEGV: a runtime error, as documented, not a memory limit.
MEMORY_VERDICT = {"c": "case 1: runtime error (killed by signal 11)"}


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_memory_hog_earns_nothing(language: str) -> None:
    s = grade(language, MEMORY[language], SUM_CASES, **OPTIONS["memory"])
    assert s.value == 0.0, s.reason
    assert s.components["passed"] == 0.0


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_memory_hog_is_named_a_memory_limit(language: str) -> None:
    s = grade(language, MEMORY[language], SUM_CASES, **OPTIONS["memory"])
    assert s.value == 0.0, s.reason
    assert MEMORY_VERDICT.get(language, "case 1: memory limit") in s.reason


@pytest.mark.parametrize("language", MANAGED)
def test_a_memory_hog_is_stopped_where_the_runtime_starts(language: str) -> None:
    # At the reward's default (1024 MiB) the runtime starts, the right program passes, and
    # the hog is stopped by the memory limit.
    assert grade(language, SUM[language], SUM_CASES, memory_mb=1024).value == 1.0
    # Filling 1 GiB takes a JVM or V8 a few CPU seconds on a loaded machine: the time limit
    # is generous so that the memory limit is what stops it.
    s = grade(
        language, MEMORY[language], SUM_CASES, memory_mb=1024, timeout=20, stop_on_failure=True
    )
    assert s.value == 0.0, s.reason
    assert "case 1: memory limit" in s.reason


# --- 7. "PASSED" and an early exit ---------------------------------------------------------

EARLY_EXIT = {
    "c": '#include <stdio.h>\n#include <stdlib.h>\nint main(void) {\n  puts("PASSED");\n'
    '  puts("ok");\n  exit(0);\n}\n',
    "cpp": '#include <cstdlib>\n#include <iostream>\nint main() {\n  std::cout << "PASSED\\nok"'
    " << std::endl;\n  std::exit(0);\n}\n",
    "go": 'package main\n\nimport (\n\t"fmt"\n\t"os"\n)\n\nfunc main() {\n\tfmt.Println("PASSED")\n'
    '\tfmt.Println("ok")\n\tos.Exit(0)\n}\n',
    "rust": 'fn main() {\n    println!("PASSED");\n    println!("ok");\n'
    "    std::process::exit(0);\n}\n",
    "java": "public class Main {\n  public static void main(String[] args) {\n"
    '    System.out.println("PASSED");\n    System.out.println("ok");\n    System.exit(0);\n'
    "  }\n}\n",
    "typescript": 'console.log("PASSED");\nconsole.log("ok");\nprocess.exit(0);\n',
}


@pytest.mark.parametrize("language", LANGUAGES)
def test_passed_and_an_early_exit_is_a_wrong_answer(language: str) -> None:
    s = grade(language, EARLY_EXIT[language], SUM_CASES, **OPTIONS["early_exit"])
    assert s.value == 0.0, s.reason
    assert s.components == {"passed": 0.0, "cases": 2.0}
    assert "case 1: wrong answer: 'PASSED\\nok'" in s.reason
    assert "case 2: wrong answer: 'PASSED\\nok'" in s.reason


# --- 8. a host file read at compile time ---------------------------------------------------

# A host file, readable by every uid, that makes the program print the secret: the program
# that includes it would pass if the compiler could read it.
SECRET = f"HOST-SECRET-{secrets.token_hex(8)}"
COMPILE_READ_NA = {
    "java": "javac reads no file a source names (no include; annotation processors only from "
    "the processor path, which the reward's flags do not set)",
    "typescript": "the program is transpiled alone: a TypeScript import is a runtime require, "
    "not a compile-time read",
}


@pytest.fixture(scope="module")
def host_dir() -> Iterator[Path]:
    """A world-readable host directory in the host's /tmp with the secret, per language:
    a C string literal, the raw text (Rust's include_str!), a Go package."""
    where = Path(tempfile.mkdtemp(prefix="referee-host-"))
    where.chmod(0o755)
    (where / "secret.h").write_text(f'"{SECRET}"\n')
    (where / "secret.txt").write_text(f"{SECRET}\n")
    (where / "secret").mkdir(mode=0o755)
    (where / "secret" / "secret.go").write_text(f'package secret\n\nconst Value = "{SECRET}"\n')
    for path in where.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    yield where
    shutil.rmtree(where, ignore_errors=True)


def _reads_host_file(language: str, where: Path) -> str:
    if language in ("c", "cpp"):
        puts = "puts(" if language == "c" else "std::puts("
        header = "#include <stdio.h>" if language == "c" else "#include <cstdio>"
        return f'{header}\nint main() {{\n  {puts}\n#include "{where}/secret.h"\n  );\n}}\n'
    if language == "rust":
        return f'fn main() {{\n    print!("{{}}", include_str!("{where}/secret.txt"));\n}}\n'
    assert language == "go"
    # GOPATH mode allows a relative import; from the build's directory it climbs to the root
    # (".." at the root stays there) and down into the host directory.
    up = "../" * 12
    return (
        f'package main\n\nimport (\n\t"fmt"\n\n\tsecret "{up}{str(where).lstrip("/")}/secret"\n)'
        "\n\nfunc main() {\n\tfmt.Println(secret.Value)\n}\n"
    )


@pytest.mark.parametrize("language", LANGUAGES)
def test_no_host_file_is_read_at_compile_time(language: str, host_dir: Path) -> None:
    if language in COMPILE_READ_NA:
        pytest.skip(f"not applicable: {COMPILE_READ_NA[language]}")
    s = grade(language, _reads_host_file(language, host_dir), [case("", SECRET + "\n")],
              **OPTIONS["compile_read"])  # fmt: skip
    assert s.value == 0.0, s.reason
    assert "compile error" in s.reason
    assert SECRET not in s.reason


@pytest.mark.skipif(os.geteuid() != 0, reason="isolation none drops to a slot uid only as root")
@pytest.mark.parametrize("language", [lang for lang in LANGUAGES if lang not in COMPILE_READ_NA])
def test_the_host_file_is_read_where_the_sandbox_is_off(language: str, host_dir: Path) -> None:
    # The control: with isolation off the same program compiles the host file in and passes.
    s = grade(language, _reads_host_file(language, host_dir), [case("", SECRET + "\n")],
              isolation="none", **OPTIONS["compile_read"])  # fmt: skip
    assert s.value == 1.0, s.reason


SHADOW = {
    "c": '#include "/etc/shadow"\nint main(void) { return 0; }\n',
    "cpp": '#include "/etc/shadow"\nint main() {}\n',
    "rust": 'const S: &str = include_str!("/etc/shadow");\nfn main() {\n    print!("{}", S);\n}\n',
}


@pytest.mark.parametrize("language", sorted(SHADOW))
def test_etc_shadow_is_not_there_at_compile_time(language: str) -> None:
    # Go's //go:embed takes no absolute path and no "..", and a relative import must be Go:
    # Go cannot name /etc/shadow at compile time (test_no_host_file... covers its imports).
    s = grade(language, SHADOW[language], [case("", "root\n")], **OPTIONS["compile_read"])
    assert s.value == 0.0, s.reason
    assert "compile error" in s.reason
    with contextlib.suppress(OSError):
        for line in Path("/etc/shadow").read_text().splitlines():
            assert not (len(line) > 4 and line in s.reason)
        assert ":$" not in s.reason  # no password hash, whatever the file holds


# --- 9. a compile-time bomb ----------------------------------------------------------------

BOMB = {
    # An endless include: gcc reads /dev/zero until its memory runs out.
    "c": '#include "/dev/zero"\nint main(void) { return 0; }\n',
    # Constant evaluation of 8e15 steps, each loop under GCC's per-loop limit.
    "cpp": _code("""
        constexpr long long spin() {
          long long x = 0;
          for (int i = 0; i < 200000; i++)
            for (int j = 0; j < 200000; j++)
              for (int k = 0; k < 200000; k++) x += i ^ j ^ k;
          return x;
        }
        static_assert(spin() != 1, "never decided");
        int main() {}
    """),
    # 2^40 expansions, each under the recursion limit.
    "rust": _code("""
        macro_rules! boom {
            (x $($rest:tt)*) => { boom!($($rest)*); boom!($($rest)*); };
            () => { let _ = 0; };
        }
        fn main() {
            boom!(x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x);
        }
    """),
}
BOMB_NA = {
    "go": "Go evaluates no program code at compile time (no macros, no constexpr, no cgo here)",
    "java": "javac runs no program code (annotation processors only from the processor path)",
    "typescript": "the program is transpiled, not type-checked: no type-level computation runs",
}


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_compile_time_bomb_is_stopped(language: str) -> None:
    if language in BOMB_NA:
        pytest.skip(f"not applicable: {BOMB_NA[language]}")
    started = time.monotonic()
    s = grade(language, BOMB[language], SUM_CASES, **OPTIONS["compile_bomb"])
    assert s.value == 0.0, s.reason
    assert "compile" in s.reason
    assert time.monotonic() - started < 5 + 10  # the compile timeout, and some slack


# --- 10. a fork bomb -----------------------------------------------------------------------

FORK_BOMB = {
    "c": "#include <unistd.h>\nint main(void) {\n  for (;;) fork();\n}\n",
    "cpp": "#include <unistd.h>\nint main() {\n  for (;;) fork();\n}\n",
    "go": _code("""
        package main

        import "os/exec"

        func main() {
            for {
                exec.Command("sleep", "100").Start()
                go func() { select {} }()
            }
        }
    """),
    "rust": _code("""
        use std::process::Command;
        use std::thread;
        use std::time::Duration;

        fn main() {
            loop {
                let _ = Command::new("sleep").arg("100").spawn();
                let _ = thread::Builder::new().spawn(|| thread::sleep(Duration::from_secs(100)));
            }
        }
    """),
    "java": _code("""
        public class Main {
          public static void main(String[] args) {
            while (true) {
              try {
                new ProcessBuilder("sleep", "100").start();
                new Thread(() -> {
                  try {
                    Thread.sleep(100_000);
                  } catch (InterruptedException e) {
                    // woken: end
                  }
                }).start();
              } catch (Throwable e) {
                // out of processes or threads: try again
              }
            }
          }
        }
    """),
    "typescript": _code("""
        import { spawn } from "child_process";

        for (;;) {
          try {
            spawn("sleep", ["100"], { detached: true, stdio: "ignore" }).on("error", () => {});
          } catch {
            // out of processes: try again
          }
        }
    """),
}


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_fork_bomb_earns_nothing_and_the_sandbox_recovers(language: str) -> None:
    s = grade(language, FORK_BOMB[language], SUM_CASES, **OPTIONS["fork_bomb"])
    assert s.value == 0.0, s.reason
    assert s.components["passed"] == 0.0
    assert no_sandbox_processes() == []  # every process of the bomb is gone from the host
    after = grade(language, SUM[language], SUM_CASES, **OPTIONS["fork_bomb"])
    assert after.value == 1.0, after.reason
