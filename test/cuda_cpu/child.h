// child.h: the runtime's tests run a case that must abort (or that needs its own environment) in a
// fresh copy of the test program: `PROGRAM --child NAME` with extra environment variables, its stderr
// and stdout captured. The runtime reads its environment once, so a case that needs another mode
// needs another process; fork alone would inherit the parent's.
#ifndef CUDA_CPU_TEST_CHILD_H
#define CUDA_CPU_TEST_CHILD_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

struct ChildResult {
    int status = 0;
    std::string out, err;
    bool aborted() const { return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT; }
    bool exited_ok() const { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }
    // err (stderr) without its trailing newlines, for a FAIL line
    std::string why() const {
        std::string s = err.empty() ? "(no message on stderr)" : err;
        while (!s.empty() && s.back() == '\n') s.pop_back();
        for (char& c : s) if (c == '\n') c = ' ';
        return s;
    }
};

// Runs `this program --child name` with env ("NAME=value" strings) added to the environment.
static inline ChildResult run_child_case(const char* name, const std::vector<std::string>& env = {}) {
    ChildResult r;
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) { r.status = -1; r.err = "readlink /proc/self/exe failed"; return r; }
    exe[n] = 0;
    int out_fd[2], err_fd[2];
    if (pipe(out_fd) != 0 || pipe(err_fd) != 0) { r.status = -1; r.err = "pipe failed"; return r; }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(out_fd[1], 1);
        dup2(err_fd[1], 2);
        close(out_fd[0]);
        close(err_fd[0]);
        for (const std::string& e : env) {
            size_t eq = e.find('=');
            setenv(e.substr(0, eq).c_str(), e.substr(eq + 1).c_str(), 1);
        }
        execl(exe, exe, "--child", name, (char*)nullptr);
        _exit(127);
    }
    close(out_fd[1]);
    close(err_fd[1]);
    // Read both pipes to the end (stdout first is fine: the cases write little).
    char buf[4096];
    ssize_t k;
    while ((k = read(out_fd[0], buf, sizeof(buf))) > 0) r.out.append(buf, (size_t)k);
    while ((k = read(err_fd[0], buf, sizeof(buf))) > 0) r.err.append(buf, (size_t)k);
    close(out_fd[0]);
    close(err_fd[0]);
    waitpid(pid, &r.status, 0);
    return r;
}

// A case that must abort (the runtime refusing a mistake): its stderr must name `kernel` and hold
// `what`. ok; why it is not (for a FAIL line); the one-line message (for the log).
struct Refusal {
    bool ok;
    std::string why, message;
};
static inline Refusal expect_refusal(const char* name, const char* kernel, const char* what) {
    ChildResult r = run_child_case(name);
    bool named = r.err.find(kernel) != std::string::npos && r.err.find(what) != std::string::npos;
    std::string why = std::string(r.aborted() ? "" : "the child did not abort; ") +
                      (named ? "" : std::string("the message lacks '") + kernel + "' or '" + what + "': ") + r.why();
    return Refusal{r.aborted() && named, why, r.why()};
}

#endif
