// The JavaScript half of settee-js, kept here as C++ raw string literals so the executable builds with one compiler
// command and no generator.
//
// The runtime (runtimeSource(): RuntimeCore.h, RuntimeFunctions.h, RuntimeSync.h and RuntimeDesign.h joined) runs in the host realm.
// It is a function expression; main.cpp calls it with the natives and gets
// back {dispatch(line), aborted()}. dispatch handles one command line of CouchDB's
// query-server protocol and writes the answer (and any log lines) with natives.print; it returns a non-zero exit
// status when the process must end (CouchDB's "fatal" errors).
//
// kSandboxPrelude (SandboxPrelude.h) is compiled once (to a stencil) and instantiated in every sandbox realm. It is a
// function expression too; the runtime calls it with the sandbox's host hooks and the JSON of the sandbox's require
// root (the design document, or {views: {lib}} for a view map function). It defines CouchDB's helpers as globals of the sandbox (emit, log, sum, toJSON, isArray, provides,
// registerType, start, send, getRow, require) and returns a small kit the runtime uses to bring data into the
// sandbox's realm (so design functions see their own realm's Object/Array: `doc.tags instanceof Array` holds).
//
// The behaviour follows CouchDB's share/server/*.js (3.x); the code is our own.

#pragma once

// The runtime's text, in three parts (one function expression across them), joined by runtimeSource().
#include "RuntimeCore.h"
#include "RuntimeFunctions.h"
#include "RuntimeSync.h"
#include "RuntimeDesign.h"

#include <string>

inline const std::string& runtimeSource() {
    static const std::string source = std::string(kRuntimeCore) + kRuntimeFunctions + kRuntimeSync + kRuntimeDesign;
    return source;
}
