// The runtime, part 4: design documents, the command loop and the lockdown; closes the function expression.
// Part of the runtime's text (see RuntimeSource.h): not valid JavaScript alone.

#pragma once

static const char kRuntimeDesign[] = R"JS(
// MARK: Design documents

var ddocs = new Map();

var ddocHandlers = {
  lists: runList,
  shows: runShow,
  filters: runFilter,
  views: runViewFilter,
  updates: runUpdate,
  validate_doc_update: runValidate,
  rewrites: runRewrite
};

function ensureBox(entry) {
  if (entry.box === null) entry.box = createBox(stringify(entry.source));
  return entry.box;
}

// The design function the last ddoc command ran, with the text its commands start with: the next command to the
// same function (a validation or filter batch) is recognised by that prefix and only its arguments are parsed.
var lastDdoc = null;

function ddocCommand(cmd, line) {
  var id = cmd[1];
  if (id === "new") {
    var newId = cmd[2];
    ddocs.set(String(newId), {source: cmd[3], box: null, funs: new Map()});
    lastDdoc = null;
    respond(true);
    return;
  }
  var funPath = cmd[2];
  if (!isArray(funPath) || funPath.length === 0) throw ["fatal", "query_protocol_error", "no function path"];
  var kind = funPath[0];
  var handler = own(ddocHandlers, kind) ? ddocHandlers[kind] : undefined;
  if (handler === undefined) throw ["fatal", "unknown_command", "unknown ddoc command '" + kind + "'"];
  var call = resolveDdoc(id, funPath, handler);
  // The arguments, parsed in the sandbox's realm: from the line itself when it is laid out as expected.
  var prefix = stringify(["ddoc", id, funPath]);
  prefix = prefix.slice(0, prefix.length - 1) + ",";
  call.prefix = prefix;
  var laidOut = line.length > prefix.length && line.startsWith(prefix) && line.endsWith("]");
  lastDdoc = laidOut ? call : null;
  runDdoc(call, laidOut ? line.slice(prefix.length, line.length - 1) : stringify(cmd[3] === undefined ? [] : cmd[3]),
          cmd[3]);
}

// A cached design document's function at funPath, compiled on first use in the document's sandbox.
function resolveDdoc(id, funPath, handler) {
  var entry = ddocs.get(String(id));
  if (entry === undefined) throw ["fatal", "query_protocol_error", "uncached design doc: " + id];
  var key = funPath.join("\u0000");
  var fun = entry.funs.get(key);
  var box = ensureBox(entry);
  if (fun === undefined) {
    var point = entry.source, source;
    for (var i = 0; i < funPath.length; i++) {
      var next = point !== null && typeof point === "object" && own(point, funPath[i]) ? point[funPath[i]] : undefined;
      if (i + 1 === funPath.length) {
        source = next;
      } else {
        point = next;
      }
    }
    if (!source) {
      throw ["error", "not_found",
             "missing " + funPath[0] + " function " + funPath[funPath.length - 1] + " on design doc " + id];
    }
    fun = compileFunction(box, source, funPath.join("."));
    entry.funs.set(key, fun);
  }
  return {prefix: null, fun: fun, box: box, handler: handler};
}

// Runs a resolved design function on its arguments' JSON text (`parsed`: the same arguments already parsed in the
// outer realm, if they were, for a text laid out in a way the sandbox's parse does not accept).
function runDdoc(call, argsText, parsed) {
  var args;
  try {
    args = call.box.kit.parse(argsText);
  } catch (e) {
    args = call.box.kit.parse(stringify(parsed === undefined ? [] : parsed));
  }
  if (!isArray(args)) throw ["error", "query_protocol_error", "the arguments must be an array"];
  applyDdoc(call, args);
}

function applyDdoc(call, args) {
  resetRender(call.box);
  call.handler(call.fun, call.box.ddoc, args, call.box);
}

// MARK: The loop

function handleError(e) {
  if (isArray(e) && e[0] === "fatal") {
    respond(["error", e[1], e[2]]);
    return 1;
  }
  if (isArray(e) && e[0] === "error") {
    respond(["error", e[1], e[2]]);
    return 0;
  }
  var res = resourceError(e);
  respond(res ? res : errorAnswer(e));
  return 0;
}

// The answer for an error a command failed with: ["error", name, message].
function errorAnswer(e) {
  try {
    if (e !== null && typeof e === "object" && e.error && e.reason) return ["error", e.error, e.reason];
    if (e !== null && typeof e === "object" && e.name) return ["error", String(e.name), errorMessage(e)];
  } catch (x) {}
  return ["error", "unnamed_error", errstr(e)];
}

var MAP_PREFIX = "[\"map_doc\",";

function dispatch(line) {
  render = null;
  emitMode = 0;
  lineLength = line.length;
  try {
    if (line.startsWith(MAP_PREFIX) && line.endsWith("]")) {
      mapDoc(line.slice(MAP_PREFIX.length, line.length - 1));
      return 0;
    }
    if (line.startsWith(SYNC_BATCH_PREFIX)) {
      lastDdoc = null;
      syncBatch(line);
      return 0;
    }
    if (line.startsWith(VALIDATE_BATCH_PREFIX)) {
      lastDdoc = null;
      validateBatch(line);
      return 0;
    }
    if (lastDdoc !== null && line.startsWith(lastDdoc.prefix) && line.endsWith("]")) {
      var args;
      try {
        args = lastDdoc.box.kit.parse(line.slice(lastDdoc.prefix.length, line.length - 1));
      } catch (e) {
        args = undefined;  // not JSON: the slow path answers as for any other malformed command
      }
      if (isArray(args)) {
        applyDdoc(lastDdoc, args);
        return 0;
      }
    }
    var cmd;
    try {
      cmd = parse(line);
    } catch (e) {
      respond(["error", "query_protocol_error", "the command is not JSON: " + errorMessage(e)]);
      return 0;
    }
    if (!isArray(cmd) || cmd.length === 0) {
      throw ["fatal", "query_protocol_error", "a command must be a non-empty array"];
    }
    switch (cmd[0]) {
      case "reset": reset(cmd[1]); break;
      case "add_lib": addLib(cmd[1]); break;
      case "add_fun": addFun(cmd[1]); break;
      case "map_doc": mapDoc(stringify(cmd[1])); break;
      case "reduce": runReduce(cmd[1], line, false, cmd[3]); break;
      case "rereduce": runReduce(cmd[1], line, true, cmd[3]); break;
      case "ddoc": ddocCommand(cmd, line); break;
      default: throw ["fatal", "unknown_command", "unknown command '" + cmd[0] + "'"];
    }
  } catch (e) {
    return handleError(e);
  } finally {
    render = null;
    emitMode = 0;
  }
  return 0;
}

// After a command was cut short (time or memory limit): sandboxes may hold half-built state (module caches), so
// design documents get fresh ones and the map functions are compiled again.
function aborted() {
  render = null;
  emitMode = 0;
  reduceCache.clear();
  syncFunctions.clear();
  lastDdoc = null;
  ddocs.forEach(function (entry) {
    entry.box = null;
    entry.funs = new Map();
  });
  var sources = state.sources;
  state.funs = [];
  for (var i = 0; i < sources.length; i++) {
    try {
      state.funs.push(compileMapFunction(sources[i]));
    } catch (e) {
      state.funs.push({box: createBox(null), fn: function () {}});
    }
  }
}

// MARK: Lockdown

// Freezes the host realm's builtins (and the intrinsics reachable only through instances), so a host object that
// reaches a sandbox (an error the runtime throws, a response object) cannot be used to change how the runtime works.
(function lockdown() {
  var seen = new Set();
  var stack = [];
  function push(v) {
    if ((typeof v === "object" && v !== null) || typeof v === "function") {
      if (!seen.has(v)) { seen.add(v); stack.push(v); }
    }
  }
  var roots = Object.getOwnPropertyNames(globalThis);
  for (var i = 0; i < roots.length; i++) {
    var d = Object.getOwnPropertyDescriptor(globalThis, roots[i]);
    if (d && "value" in d) push(d.value);
  }
  var g = function* () {}, ag = async function* () {}, af = async function () {};
  push(Object.getPrototypeOf(g)); push(Object.getPrototypeOf(ag)); push(Object.getPrototypeOf(af));
  push(Object.getPrototypeOf(g())); push(Object.getPrototypeOf(ag()));
  push(Object.getPrototypeOf([][Symbol.iterator]()));
  push(Object.getPrototypeOf(new Map()[Symbol.iterator]()));
  push(Object.getPrototypeOf(new Set()[Symbol.iterator]()));
  push(Object.getPrototypeOf(""[Symbol.iterator]()));
  push(Object.getPrototypeOf(/x/[Symbol.matchAll]("")));
  push(Object.getPrototypeOf(Int8Array));
  push(Object.getOwnPropertyDescriptor(Function.prototype, "caller"));
  push(Object.getOwnPropertyDescriptor(Function.prototype, "arguments"));
  while (stack.length) {
    var o = stack.pop();
    push(Object.getPrototypeOf(o));
    var keys = Reflect.ownKeys(o);
    for (var k = 0; k < keys.length; k++) {
      var desc = Object.getOwnPropertyDescriptor(o, keys[k]);
      if (!desc) continue;
      if ("value" in desc) push(desc.value);
      if (desc.get) push(desc.get);
      if (desc.set) push(desc.set);
    }
    try { Object.freeze(o); } catch (e) {}
  }
})();

return {dispatch: dispatch, aborted: aborted};
})
)JS";
