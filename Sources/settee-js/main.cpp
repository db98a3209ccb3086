// settee-js: Settee's JavaScript query server. It speaks CouchDB's query-server protocol (one JSON command per line
// on standard input, one JSON answer per line on standard output, `["log", …]` lines before an answer) the way
// CouchDB's `couchjs` does, with SpiderMonkey 102 embedded.
//
// Layout:
//  * This file: the engine (one JSContext), the natives the runtime needs, line I/O, the memory cap and the watchdog
//    that interrupts a command running past its time limit.
//  * RuntimeSource.h (RuntimeCore.h, RuntimeFunctions.h, RuntimeDesign.h; SandboxPrelude.h): the JavaScript runtime (protocol loop, CouchDB's design-function environment) and the prelude
//    evaluated in every sandbox.
//
// Realms: the runtime runs in the "host" realm, whose global holds only the standard ECMAScript builtins; the natives
// (print, readline, gc, …) are handed to the runtime as arguments and are not reachable from any global. Design
// functions run in sandbox realms (one per design document, one per view map function, one per reduce source) in the
// same compartment: each has its own standard builtins and only CouchDB's helpers (emit, log, sum, toJSON, isArray,
// provides, registerType, start, send, getRow, require). Runtime code generation (eval, Function) is refused in every
// realm by the content-security-policy callback; the runtime compiles design functions with the natives. After the
// runtime is set up it freezes the host realm's builtins, so the host objects a sandbox may get hold of cannot be
// used to alter the runtime.
//
// Flags:
//   --timeout-ms N   a command running longer is interrupted and answered ["error","timeout",…] (default 5000, 0 = none)
//   --max-heap-mb N  the JS heap limit (JSGC_MAX_BYTES); going over it is an out-of-memory error (default 256, 0 = none)
//   --max-rss-mb N   a command that drives the resident set past this is interrupted and answered
//                    ["error","out_of_memory",…] (default 2 × heap + 64, 0 = none)
//   --no-jit         run with the interpreter only (as couchjs does)
//
// Build: c++ -std=c++17 -O2 main.cpp $(pkg-config --cflags --libs mozjs-102) -lpthread -o settee-js

// SwiftPM's debug builds define DEBUG; the headers of a release SpiderMonkey refuse it (struct layouts differ between
// debug and release builds), and nothing here uses it.
#ifdef DEBUG
#undef DEBUG
#endif

#include <jsapi.h>
#include <jsfriendapi.h>
#include <js/CompilationAndEvaluation.h>
#include <js/Conversions.h>
#include <js/ContextOptions.h>
#include <js/Initialization.h>
#include <js/SourceText.h>
#include <js/StableStringChars.h>
#include <js/Warnings.h>
#include <js/Exception.h>
#include <js/Interrupt.h>
#include <js/Stack.h>
#include <js/CharacterEncoding.h>
#include <js/GlobalObject.h>
#include <js/Principals.h>
#include <js/PropertySpec.h>
#include <js/RealmOptions.h>
#include <js/String.h>
#include <js/Object.h>
#include <js/ArrayBuffer.h>
#include <js/experimental/JSStencil.h>
#include <mozilla/RefPtr.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include "RuntimeSource.h"
#include "SandboxPrelude.h"

namespace {

// MARK: Options

struct Options {
    long timeoutMs = 5000;
    long maxHeapMB = 256;
    long maxRssMB = -1;  // -1: derived from the heap limit
    bool jit = true;
};

Options g_options;

void usage(FILE* f) {
    fprintf(f,
            "usage: settee-js [--timeout-ms N] [--max-heap-mb N] [--max-rss-mb N] [--no-jit]\n"
            "CouchDB query-server protocol on stdin/stdout (SpiderMonkey %s).\n",
            "102");
}

bool parseLong(const char* s, long* out) {
    if (!s || !*s) return false;
    char* end = nullptr;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < 0) return false;
    *out = v;
    return true;
}

// MARK: Output

std::string g_out;

void flushOutput() {
    size_t off = 0;
    while (off < g_out.size()) {
        ssize_t n = write(STDOUT_FILENO, g_out.data() + off, g_out.size() - off);
        if (n < 0) {
            if (errno == EINTR) continue;
            _exit(0);  // the parent went away
        }
        off += size_t(n);
    }
    g_out.clear();
}

void writeLine(const char* p, size_t n) {
    g_out.append(p, n);
    g_out.push_back('\n');
    if (g_out.size() >= (1u << 20)) flushOutput();
}

void writeLine(const std::string& s) { writeLine(s.data(), s.size()); }

// MARK: Input

struct LineReader {
    std::string buf;
    size_t start = 0;
    bool eof = false;

    // The next line without its terminator; false at the end of input. Output is flushed before blocking.
    bool next(std::string& line) {
        for (;;) {
            size_t nl = buf.find('\n', start);
            if (nl != std::string::npos) {
                size_t end = nl;
                if (end > start && buf[end - 1] == '\r') end--;
                line.assign(buf, start, end - start);
                start = nl + 1;
                if (start == buf.size()) {
                    buf.clear();
                    start = 0;
                }
                return true;
            }
            if (eof) {
                if (start < buf.size()) {
                    line.assign(buf, start, std::string::npos);
                    buf.clear();
                    start = 0;
                    return true;
                }
                return false;
            }
            if (start > 0) {
                buf.erase(0, start);
                start = 0;
            }
            flushOutput();
            char chunk[1 << 16];
            ssize_t n = read(STDIN_FILENO, chunk, sizeof chunk);
            if (n < 0) {
                if (errno == EINTR) continue;
                eof = true;
                continue;
            }
            if (n == 0) {
                eof = true;
                continue;
            }
            buf.append(chunk, size_t(n));
        }
    }
};

LineReader g_in;

// MARK: Watchdog

enum Reason : int { kNone = 0, kTimeout = 1, kMemory = 2 };

long residentMB() {
    FILE* f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    long size = 0, resident = 0;
    if (fscanf(f, "%ld %ld", &size, &resident) != 2) resident = 0;
    fclose(f);
    return long((resident * sysconf(_SC_PAGESIZE)) >> 20);
}

// Interrupts a command that runs too long (or grows the process too much). The JS thread stamps the start of each
// command (and of each stretch of a list exchange) without locking; the watchdog thread polls every few milliseconds
// while a command runs and sleeps on a condition variable when the process has been idle for a while.
struct Watchdog {
    JSContext* cx = nullptr;
    std::atomic<int64_t> start{0};       // 0: idle
    std::atomic<int64_t> firedFor{0};    // the start stamp the last interrupt was requested for
    std::atomic<int> reason{kNone};
    std::atomic<long> timeoutMs{5000};
    std::atomic<bool> sleeping{false};
    std::atomic<bool> stop{false};
    long maxRssMB = 0;
    int64_t lastStamp = 0;
    std::mutex mutex;
    std::condition_variable cv;
    std::thread thread;

    static int64_t now() {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::steady_clock::now().time_since_epoch())
            .count();
    }

    // JS thread: a command (or a stretch of one) begins. Returns its stamp.
    int64_t begin() {
        int64_t t = now();
        if (t <= lastStamp) t = lastStamp + 1;
        lastStamp = t;
        start.store(t);
        if (sleeping.load()) {
            std::lock_guard<std::mutex> g(mutex);
            cv.notify_one();
        }
        return t;
    }
    void end() { start.store(0); }

    void run() {
        using namespace std::chrono;
        int64_t idleSince = now();
        int64_t lastRssCheck = 0;
        std::unique_lock<std::mutex> lock(mutex);
        while (!stop.load()) {
            int64_t s = start.load();
            int64_t t = now();
            if (s == 0) {
                if (t - idleSince > 1000000000LL) {
                    sleeping.store(true);
                    while (!stop.load() && start.load() == 0) cv.wait(lock);
                    sleeping.store(false);
                    continue;
                }
            } else {
                idleSince = t;
                long limit = timeoutMs.load();
                if (firedFor.load() != s) {
                    if (limit > 0 && t - s > int64_t(limit) * 1000000LL) {
                        fire(s, kTimeout);
                    } else if (maxRssMB > 0 && t - lastRssCheck > 20000000LL) {
                        lastRssCheck = t;
                        if (residentMB() > maxRssMB) fire(s, kMemory);
                    }
                }
            }
            cv.wait_for(lock, milliseconds(5));
        }
    }

    void fire(int64_t s, Reason r) {
        if (start.load() != s) return;
        reason.store(r);
        firedFor.store(s);
        JS_RequestInterruptCallback(cx);
    }

    void launch(JSContext* context, long timeout, long rssMB) {
        cx = context;
        timeoutMs.store(timeout);
        maxRssMB = rssMB;
        thread = std::thread([this] { run(); });
    }

    void shutdown() {
        stop.store(true);
        {
            std::lock_guard<std::mutex> g(mutex);
            cv.notify_one();
        }
        if (thread.joinable()) thread.join();
    }
};

Watchdog g_watchdog;

// After each collection during a command: when the live heap is still close to the cap, stop the command now (as an
// out-of-memory error) instead of letting SpiderMonkey collect again and again until the cap is hit.
uint32_t g_heapAbortBytes = 0;

void gcCallback(JSContext* cx, JSGCStatus status, JS::GCReason, void*) {
    if (status != JSGC_END || g_heapAbortBytes == 0) return;
    int64_t s = g_watchdog.start.load();
    if (s == 0 || g_watchdog.firedFor.load() == s) return;
    if (JS_GetGCParameter(cx, JSGC_BYTES) > g_heapAbortBytes) g_watchdog.fire(s, kMemory);
}

bool interruptCallback(JSContext*) {
    int64_t s = g_watchdog.start.load();
    return !(g_watchdog.reason.load() != kNone && s != 0 && g_watchdog.firedFor.load() == s);
}

// MARK: Engine state

JSContext* g_cx = nullptr;
JS::PersistentRootedObject* g_hostGlobal = nullptr;

const JSClass kGlobalClass = {"global", JSCLASS_GLOBAL_FLAGS, &JS::DefaultGlobalClassOps};

bool refuseCodeGeneration(JSContext*, JS::RuntimeCode, JS::HandleString) { return false; }
const JSSecurityCallbacks kSecurityCallbacks = {refuseCodeGeneration, nullptr};

void ignoreWarning(JSContext*, JSErrorReport*) {}

// A JS string from UTF-8 bytes: Latin-1 storage when the line is ASCII, lossy decoding when it isn't valid UTF-8.
JSString* newString(JSContext* cx, const char* p, size_t n) {
    bool ascii = true;
    for (size_t i = 0; i < n; i++) {
        if (static_cast<unsigned char>(p[i]) >= 0x80) {
            ascii = false;
            break;
        }
    }
    if (ascii) return JS_NewStringCopyN(cx, p, n);
    JSString* s = JS_NewStringCopyUTF8N(cx, JS::UTF8Chars(p, n));
    if (s) return s;
    if (JS_IsThrowingOutOfMemory(cx)) return nullptr;
    JS_ClearPendingException(cx);
    size_t len = 0;
    JS::TwoByteCharsZ chars = JS::LossyUTF8CharsToNewTwoByteCharsZ(cx, JS::UTF8Chars(p, n), &len, js::MallocArena);
    if (!chars) return nullptr;
    return JS_NewUCString(cx, JS::UniqueTwoByteChars(chars.get()), len);
}

// Appends a JS string as UTF-8 to `out` (fast path: ASCII Latin-1 strings).
bool appendUTF8(JSContext* cx, JS::HandleString str, std::string& out) {
    JSLinearString* linear = JS_EnsureLinearString(cx, str);
    if (!linear) return false;
    if (JS::StringHasLatin1Chars(str)) {
        JS::AutoCheckCannotGC nogc;
        size_t len = 0;
        const JS::Latin1Char* chars = JS_GetLatin1StringCharsAndLength(cx, nogc, str, &len);
        bool ascii = true;
        for (size_t i = 0; i < len; i++) {
            if (chars[i] >= 0x80) {
                ascii = false;
                break;
            }
        }
        if (ascii) {
            out.append(reinterpret_cast<const char*>(chars), len);
            return true;
        }
    }
    JS::UniqueChars utf8 = JS_EncodeStringToUTF8(cx, str);
    if (!utf8) return false;
    out.append(utf8.get());
    return true;
}

std::string toStdString(JSContext* cx, JS::HandleValue v) {
    JS::RootedString s(cx, JS::ToString(cx, v));
    if (!s) {
        JS_ClearPendingException(cx);
        return "(unprintable)";
    }
    std::string out;
    if (!appendUTF8(cx, s, out)) {
        JS_ClearPendingException(cx);
        return "(unprintable)";
    }
    return out;
}

std::string jsonQuote(const std::string& s) {
    std::string o = "\"";
    for (unsigned char c : s) {
        switch (c) {
            case '"': o += "\\\""; break;
            case '\\': o += "\\\\"; break;
            case '\n': o += "\\n"; break;
            case '\r': o += "\\r"; break;
            case '\t': o += "\\t"; break;
            default:
                if (c < 0x20) {
                    char b[8];
                    snprintf(b, sizeof b, "\\u%04x", c);
                    o += b;
                } else {
                    o += char(c);
                }
        }
    }
    return o + "\"";
}

void writeError(const std::string& name, const std::string& reason) {
    writeLine("[\"error\"," + jsonQuote(name) + "," + jsonQuote(reason) + "]");
}

// MARK: Natives (handed to the runtime only)

bool nativePrint(JSContext* cx, unsigned argc, JS::Value* vp) {
    JS::CallArgs args = JS::CallArgsFromVp(argc, vp);
    if (!args.get(0).isString()) {
        JS_ReportErrorASCII(cx, "print: a string is expected");
        return false;
    }
    JS::RootedString s(cx, args[0].toString());
    size_t before = g_out.size();
    if (!appendUTF8(cx, s, g_out)) {
        g_out.resize(before);
        return false;
    }
    g_out.push_back('\n');
    if (g_out.size() >= (1u << 20)) flushOutput();
    args.rval().setUndefined();
    return true;
}

// The next line of input (list rows), or null at the end of input. The time spent waiting for the parent does not
// count against the command's time limit.
bool nativeReadline(JSContext* cx, unsigned argc, JS::Value* vp) {
    JS::CallArgs args = JS::CallArgsFromVp(argc, vp);
    std::string line;
    g_watchdog.end();
    bool got = g_in.next(line);
    g_watchdog.begin();
    if (!got) {
        args.rval().setNull();
        return true;
    }
    JSString* s = newString(cx, line.data(), line.size());
    if (!s) return false;
    args.rval().setString(s);
    return true;
}

bool nativeGC(JSContext* cx, unsigned argc, JS::Value* vp) {
    JS::CallArgs args = JS::CallArgsFromVp(argc, vp);
    JS_GC(cx);
    args.rval().setUndefined();
    return true;
}

bool interruptedNow() {
    int64_t s = g_watchdog.start.load();
    return g_watchdog.reason.load() != kNone && s != 0 && g_watchdog.firedFor.load() == s;
}

// Runs the queued promise jobs. SpiderMonkey's queue carries on past a job stopped by the interrupt callback, so the
// interrupt is passed on here: the command then ends as timed out.
bool nativeRunJobs(JSContext* cx, unsigned argc, JS::Value* vp) {
    JS::CallArgs args = JS::CallArgsFromVp(argc, vp);
    js::RunJobs(cx);
    if (interruptedNow()) return false;
    args.rval().setUndefined();
    return true;
}

// An exception escaping a promise job is dropped (SpiderMonkey needs an environment to report it in).
struct DropExceptions : js::ScriptEnvironmentPreparer {
    void invoke(JS::HandleObject global, Closure& closure) override {
        JSContext* cx = g_cx;
        JSAutoRealm ar(cx, global);
        if (!closure(cx)) JS_ClearPendingException(cx);
    }
};
DropExceptions g_preparer;

// The time limit starts again: the next item of a command that is many calls in one (validate_batch).
bool nativeRestartClock(JSContext* cx, unsigned argc, JS::Value* vp) {
    JS::CallArgs args = JS::CallArgsFromVp(argc, vp);
    g_watchdog.begin();
    args.rval().setUndefined();
    return true;
}

bool nativeSetTimeout(JSContext* cx, unsigned argc, JS::Value* vp) {
    JS::CallArgs args = JS::CallArgsFromVp(argc, vp);
    double ms = 0;
    if (!JS::ToNumber(cx, args.get(0), &ms)) return false;
    if (ms >= 0 && ms < double(LONG_MAX)) g_watchdog.timeoutMs.store(long(ms));
    args.rval().setUndefined();
    return true;
}

// A new sandbox: a global with the standard builtins (resolved lazily), in its own realm of the host compartment.
bool nativeNewSandbox(JSContext* cx, unsigned argc, JS::Value* vp) {
    JS::CallArgs args = JS::CallArgsFromVp(argc, vp);
    JS::RealmOptions options;
    options.creationOptions().setExistingCompartment(g_hostGlobal->get()).setToSourceEnabled(true);
    JS::RootedObject global(cx, JS_NewGlobalObject(cx, &kGlobalClass, nullptr, JS::DontFireOnNewGlobalHook, options));
    if (!global) return false;
    {
        JSAutoRealm ar(cx, global);
        JS_FireOnNewGlobalObject(cx, global);
    }
    args.rval().setObject(*global);
    return true;
}

bool sourceArgs(JSContext* cx, const JS::CallArgs& args, JS::MutableHandleObject global, JS::MutableHandleString source,
                std::string& filename) {
    if (!args.get(0).isObject() || !JS_IsGlobalObject(&args[0].toObject())) {
        JS_ReportErrorASCII(cx, "a sandbox is expected");
        return false;
    }
    global.set(&args[0].toObject());
    source.set(JS::ToString(cx, args.get(1)));
    if (!source) return false;
    filename = args.get(2).isString() ? toStdString(cx, args[2]) : std::string("<design function>");
    return true;
}

// evaluate(sandbox, source, filename): runs `source` as a script in the sandbox's realm; its completion value.
bool nativeEvaluate(JSContext* cx, unsigned argc, JS::Value* vp) {
    JS::CallArgs args = JS::CallArgsFromVp(argc, vp);
    JS::RootedObject global(cx);
    JS::RootedString source(cx);
    std::string filename;
    if (!sourceArgs(cx, args, &global, &source, filename)) return false;
    JS::AutoStableStringChars chars(cx);
    if (!chars.initTwoByte(cx, source)) return false;
    mozilla::Range<const char16_t> range = chars.twoByteRange();
    JS::SourceText<char16_t> text;
    if (!text.init(cx, range.begin().get(), range.length(), JS::SourceOwnership::Borrowed)) return false;
    JS::RootedValue result(cx);
    {
        JSAutoRealm ar(cx, global);
        JS::CompileOptions opts(cx);
        opts.setFileAndLine(filename.c_str(), 1);
        if (!JS::Evaluate(cx, opts, text, &result)) return false;
    }
    args.rval().set(result);
    return true;
}

// syntaxError(sandbox, source): undefined when `source` compiles as a script, else the error it raises.
bool nativeSyntaxError(JSContext* cx, unsigned argc, JS::Value* vp) {
    JS::CallArgs args = JS::CallArgsFromVp(argc, vp);
    JS::RootedObject global(cx);
    JS::RootedString source(cx);
    std::string filename;
    if (!sourceArgs(cx, args, &global, &source, filename)) return false;
    JS::AutoStableStringChars chars(cx);
    if (!chars.initTwoByte(cx, source)) return false;
    mozilla::Range<const char16_t> range = chars.twoByteRange();
    JS::SourceText<char16_t> text;
    if (!text.init(cx, range.begin().get(), range.length(), JS::SourceOwnership::Borrowed)) return false;
    JS::RootedValue error(cx);
    {
        JSAutoRealm ar(cx, global);
        JS::CompileOptions opts(cx);
        opts.setFileAndLine(filename.c_str(), 1);
        JS::RootedScript script(cx, JS::Compile(cx, opts, text));
        if (!script) {
            if (!JS_IsExceptionPending(cx) || JS_IsThrowingOutOfMemory(cx)) return false;
            if (!JS_GetPendingException(cx, &error)) return false;
            JS_ClearPendingException(cx);
        }
    }
    args.rval().set(error);
    return true;
}

// The sandbox prelude, compiled once; each sandbox instantiates it (no parsing per sandbox).
RefPtr<JS::Stencil> g_prelude;

// prelude(sandbox): runs the prelude in the sandbox's realm; the installer function it evaluates to.
bool nativePrelude(JSContext* cx, unsigned argc, JS::Value* vp) {
    JS::CallArgs args = JS::CallArgsFromVp(argc, vp);
    if (!args.get(0).isObject() || !JS_IsGlobalObject(&args[0].toObject())) {
        JS_ReportErrorASCII(cx, "a sandbox is expected");
        return false;
    }
    JS::RootedObject global(cx, &args[0].toObject());
    JS::RootedValue result(cx);
    {
        JSAutoRealm ar(cx, global);
        JS::InstantiateOptions options;
        JS::RootedScript script(cx, JS::InstantiateGlobalStencil(cx, options, g_prelude.get()));
        if (!script || !JS_ExecuteScript(cx, script, &result)) return false;
    }
    args.rval().set(result);
    return true;
}

const JSFunctionSpec kNatives[] = {
    JS_FN("print", nativePrint, 1, 0),
    JS_FN("readline", nativeReadline, 0, 0),
    JS_FN("gc", nativeGC, 0, 0),
    JS_FN("runJobs", nativeRunJobs, 0, 0),
    JS_FN("setTimeout", nativeSetTimeout, 1, 0),
    JS_FN("restartClock", nativeRestartClock, 0, 0),
    JS_FN("newSandbox", nativeNewSandbox, 0, 0),
    JS_FN("evaluate", nativeEvaluate, 3, 0),
    JS_FN("syntaxError", nativeSyntaxError, 3, 0),
    JS_FN("prelude", nativePrelude, 1, 0),
    JS_FS_END,
};

// MARK: Running

// Reports the failure of a runtime call that escaped the runtime's own error handling: an interrupt (time or memory
// limit), running out of memory, or an exception the runtime could not turn into an answer. `interrupt`: the reason
// of an interrupt requested for the stretch of work that failed (kNone if there was none).
void reportFailure(JSContext* cx, int interrupt) {
    if (JS_IsExceptionPending(cx)) {
        bool oom = JS_IsThrowingOutOfMemory(cx);
        JS::RootedValue exc(cx);
        JS_GetPendingException(cx, &exc);
        JS_ClearPendingException(cx);
        if (oom) {
            writeError("out_of_memory", "the JavaScript heap limit was reached");
        } else {
            writeError("internal_error", toStdString(cx, exc));
        }
    } else if (interrupt == kTimeout) {
        writeError("timeout", "the function ran longer than " + std::to_string(g_watchdog.timeoutMs.load()) + " ms");
    } else if (interrupt == kMemory) {
        writeError("out_of_memory", "the function used more memory than allowed (JavaScript heap " +
                                        std::to_string(g_options.maxHeapMB) + " MB, resident " +
                                        std::to_string(g_watchdog.maxRssMB) + " MB)");
    } else {
        writeError("out_of_memory", "the function was stopped (out of memory or an uncatchable error)");
    }
    g_watchdog.reason.store(kNone);
    g_watchdog.firedFor.store(0);
}

void reclaim(JSContext* cx) {
    JS_GC(cx);
    malloc_trim(0);
}

int runEngine() {
    long heapMB = g_options.maxHeapMB;
    uint32_t maxBytes = heapMB <= 0 || heapMB >= 4095 ? 0xffffffffu : uint32_t(heapMB) << 20;
    JSContext* cx = JS_NewContext(maxBytes);
    if (!cx) {
        fprintf(stderr, "settee-js: cannot create a JavaScript context\n");
        return 1;
    }
    g_cx = cx;
    JS_SetNativeStackQuota(cx, 8u << 20);
    JS_SetGCParameter(cx, JSGC_MAX_BYTES, maxBytes);
    JS::ContextOptionsRef(cx).setWasm(false).setWasmBaseline(false).setWasmIon(false).setAsmJS(false);
    if (!g_options.jit) {
        JS_SetGlobalJitCompilerOption(cx, JSJITCOMPILER_BASELINE_ENABLE, 0);
        JS_SetGlobalJitCompilerOption(cx, JSJITCOMPILER_ION_ENABLE, 0);
    }
    // Promise jobs (async functions in design functions) run on an internal queue, drained after each call.
    if (!js::UseInternalJobQueues(cx)) return 1;
    if (!JS::InitSelfHostedCode(cx)) {
        fprintf(stderr, "settee-js: cannot initialise SpiderMonkey's self-hosted code\n");
        return 1;
    }
    JS::SetWarningReporter(cx, ignoreWarning);
    js::SetScriptEnvironmentPreparer(cx, &g_preparer);
    JS_SetSecurityCallbacks(cx, &kSecurityCallbacks);
    JS_AddInterruptCallback(cx, interruptCallback);
    if (maxBytes != 0xffffffffu) {
        g_heapAbortBytes = uint32_t(uint64_t(maxBytes) * 85 / 100);
        JS_SetGCCallback(cx, gcCallback, nullptr);
    }

    int status = 0;
    {
        JS::RealmOptions options;
        options.creationOptions().setToSourceEnabled(true);
        JS::RootedObject global(cx, JS_NewGlobalObject(cx, &kGlobalClass, nullptr, JS::FireOnNewGlobalHook, options));
        if (!global) return 1;
        JS::PersistentRootedObject hostGlobal(cx, global);
        g_hostGlobal = &hostGlobal;
        JSAutoRealm ar(cx, global);
        if (!JS::InitRealmStandardClasses(cx)) return 1;

        JS::RootedObject natives(cx, JS_NewPlainObject(cx));
        if (!natives || !JS_DefineFunctions(cx, natives, kNatives)) return 1;

        // The runtime is a function expression: (function (natives) { …; return {dispatch, aborted}; })
        JS::RootedValue runtimeFactory(cx);
        {
            JS::CompileOptions opts(cx);
            opts.setFileAndLine("settee:runtime.js", 1);
            JS::SourceText<mozilla::Utf8Unit> text;
            if (!text.init(cx, runtimeSource().data(), runtimeSource().size(), JS::SourceOwnership::Borrowed) ||
                !JS::Evaluate(cx, opts, text, &runtimeFactory)) {
                JS::RootedValue exc(cx);
                if (JS_GetPendingException(cx, &exc)) fprintf(stderr, "settee-js: runtime: %s\n", toStdString(cx, exc).c_str());
                return 1;
            }
        }
        {
            JS::CompileOptions opts(cx);
            opts.setFileAndLine("settee:prelude.js", 1);
            JS::SourceText<mozilla::Utf8Unit> text;
            if (!text.init(cx, kSandboxPrelude, strlen(kSandboxPrelude), JS::SourceOwnership::Borrowed)) return 1;
            g_prelude = JS::CompileGlobalScriptToStencil(cx, opts, text);
            if (!g_prelude) {
                JS::RootedValue exc(cx);
                if (JS_GetPendingException(cx, &exc)) fprintf(stderr, "settee-js: prelude: %s\n", toStdString(cx, exc).c_str());
                return 1;
            }
        }
        JS::RootedValueArray<1> factoryArgs(cx);
        factoryArgs[0].setObject(*natives);
        JS::RootedValue runtime(cx);
        if (!JS_CallFunctionValue(cx, nullptr, runtimeFactory, factoryArgs, &runtime) || !runtime.isObject()) {
            JS::RootedValue exc(cx);
            if (JS_GetPendingException(cx, &exc)) fprintf(stderr, "settee-js: runtime: %s\n", toStdString(cx, exc).c_str());
            return 1;
        }
        JS::RootedObject runtimeObject(cx, &runtime.toObject());
        JS::RootedValue dispatch(cx), aborted(cx);
        if (!JS_GetProperty(cx, runtimeObject, "dispatch", &dispatch) ||
            !JS_GetProperty(cx, runtimeObject, "aborted", &aborted)) {
            return 1;
        }

        g_watchdog.launch(cx, g_options.timeoutMs, g_options.maxRssMB);

        std::string line;
        while (g_in.next(line)) {
            if (line.empty()) continue;
            g_watchdog.begin();
            JS::RootedString str(cx, newString(cx, line.data(), line.size()));
            JS::RootedValue result(cx);
            bool ok = false;
            if (str) {
                JS::RootedValueArray<1> argv(cx);
                argv[0].setString(str);
                ok = JS_CallFunctionValue(cx, nullptr, dispatch, argv, &result);
            }
            int interrupt = !ok && interruptedNow() ? g_watchdog.reason.load() : int(kNone);
            g_watchdog.end();
            if (!ok) {
                reportFailure(cx, interrupt);
                reclaim(cx);
                // Drop what the interrupted command may have left half-built (module caches, sandboxes).
                g_watchdog.begin();
                JS::RootedValue ignored(cx);
                bool cleaned = JS_CallFunctionValue(cx, nullptr, aborted, JS::HandleValueArray::empty(), &ignored);
                g_watchdog.end();
                if (!cleaned) {
                    JS_ClearPendingException(cx);
                    status = 1;
                    break;
                }
                long limit = g_watchdog.maxRssMB;
                if (limit > 0 && residentMB() > limit) {
                    fprintf(stderr, "settee-js: still above %ld MB after a garbage collection; exiting\n", limit);
                    status = 1;
                    break;
                }
                continue;
            }
            if (result.isInt32() && result.toInt32() != 0) {
                status = result.toInt32() & 0xff;
                break;
            }
            JS_MaybeGC(cx);
        }
        flushOutput();
        g_watchdog.shutdown();
        g_hostGlobal = nullptr;
        g_prelude = nullptr;
    }
    JS_DestroyContext(cx);
    return status;
}

struct ThreadResult {
    int status = 0;
};

void* engineThread(void* arg) {
    static_cast<ThreadResult*>(arg)->status = runEngine();
    return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto value = [&](long* out) {
            if (i + 1 >= argc || !parseLong(argv[i + 1], out)) {
                fprintf(stderr, "settee-js: %s needs a non-negative integer\n", a.c_str());
                exit(2);
            }
            i++;
        };
        if (a == "--timeout-ms") value(&g_options.timeoutMs);
        else if (a == "--max-heap-mb") value(&g_options.maxHeapMB);
        else if (a == "--max-rss-mb") value(&g_options.maxRssMB);
        else if (a == "--no-jit") g_options.jit = false;
        else if (a == "-h" || a == "--help") {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "settee-js: unknown argument %s\n", a.c_str());
            usage(stderr);
            return 2;
        }
    }
    if (g_options.maxRssMB < 0) g_options.maxRssMB = g_options.maxHeapMB > 0 ? g_options.maxHeapMB * 2 + 64 : 0;
    signal(SIGPIPE, SIG_IGN);

    // ArrayBuffers stay under 2 GB: one allocation cannot grow the process by more than that between two checks of
    // the resident size. (RLIMIT_DATA is no use as a backstop: SpiderMonkey's JIT crashes when mprotect fails.)
    JS::SetLargeArrayBuffersEnabled(false);
    if (!JS_Init()) {
        fprintf(stderr, "settee-js: JS_Init failed\n");
        return 1;
    }
    // SpiderMonkey runs on a thread with a known, generous stack; the native stack quota stays well inside it.
    ThreadResult result;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 16u << 20);
    pthread_t engine;
    if (pthread_create(&engine, &attr, engineThread, &result) != 0) {
        fprintf(stderr, "settee-js: cannot start the engine thread\n");
        return 1;
    }
    pthread_join(engine, nullptr);
    pthread_attr_destroy(&attr);
    JS_ShutDown();
    return result.status;
}
