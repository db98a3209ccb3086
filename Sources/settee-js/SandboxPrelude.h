// The sandbox prelude (see RuntimeSource.h): CouchDB's helpers as globals of each sandbox realm, and the small kit
// the runtime uses to bring data into it.

#pragma once

static const char kSandboxPrelude[] = R"JS(
(function (host, rootJSON) {
  "use strict";
  var G = globalThis;
  var parse = JSON.parse, stringify = JSON.stringify, arrayIsArray = Array.isArray;
  var hostEmit = host.emit, hostLog = host.log, hostProvides = host.provides, hostRegisterType = host.registerType,
      hostStart = host.start, hostSend = host.send, hostGetRow = host.getRow, hostCompileModule = host.compileModule;

  // While mapDocument runs, emit collects rows here, in this realm; otherwise it goes to the host (filters by
  // view). Rows are written as an array element, not with push, which the design function could replace.
  var collected = null;
  function errorToJSON(e) {
    try {
      if (typeof e === "object" && e !== null && "stack" in e && "name" in e && "message" in e) {
        return {error: e.name, message: e.message};
      }
    } catch (x) {}
    return e;
  }
  function emit(key, value) {
    if (collected !== null) collected[collected.length] = [key, errorToJSON(value)];
    else hostEmit(key, value);
  }
  function log(message) { hostLog(message); }
  function sum(values) {
    var rv = 0;
    for (var i in values) rv += values[i];
    return rv;
  }
  function toJSON(value) { return stringify(value); }
  function isArray(value) { return arrayIsArray(value); }
  function provides(type, fun) { hostProvides(type, fun); }
  function registerType() {
    var args = [];
    for (var i = 0; i < arguments.length; i++) args[i] = arguments[i];
    hostRegisterType(args);
  }
  function start(resp) { hostStart(resp); }
  function send(chunk) { hostSend(chunk.toString()); }
  function getRow() { return hostGetRow(); }

  G.emit = emit; G.log = log; G.sum = sum; G.toJSON = toJSON; G.isArray = isArray; G.provides = provides;
  G.registerType = registerType; G.start = start; G.send = send; G.getRow = getRow;

  var root = rootJSON === null || rootJSON === undefined ? null : parse(rootJSON);

  function errstr(e) {
    try {
      if (e !== null && e !== undefined && typeof e.toSource === "function") return String(e.toSource());
      return String(e);
    } catch (x) { return "(an error that cannot be printed)"; }
  }

  // CommonJS modules stored in the design document. A "place" is {current, parent, id}: current is an object of
  // the document (a directory) or a module's source; parent is the place of the object that contains it.
  function resolve(names, place, fromRoot) {
    if (names.length === 0) {
      if (typeof place.current !== "string") {
        throw ["error", "invalid_require_path", "Must require a JavaScript string, not: " + (typeof place.current)];
      }
      return {current: place.current, parent: place.parent, id: place.id, exports: {}};
    }
    var n = names.shift();
    if (n === "..") {
      if (!(place && place.parent && place.parent.parent)) {
        throw ["error", "invalid_require_path", "Object has no parent " + stringify(place ? place.current : null)];
      }
      return resolve(names, {
        id: place.id.slice(0, place.id.lastIndexOf("/")),
        parent: place.parent.parent,
        current: place.parent.current
      }, false);
    }
    if (n === ".") {
      if (!(place && place.parent)) {
        throw ["error", "invalid_require_path", "Object has no parent " + stringify(place ? place.current : null)];
      }
      return resolve(names, {parent: place.parent, current: place.current, id: place.id}, false);
    }
    if (fromRoot) place = {current: root};
    var here = place.current;
    if (here === null || here === undefined || here[n] === undefined) {
      throw ["error", "invalid_require_path", "Object has no property \"" + n + "\". " + stringify(here)];
    }
    return resolve(names, {current: here[n], parent: place, id: place.id ? place.id + "/" + n : n}, false);
  }

  var cache = Object.create(null);

  function requireFrom(name, module) {
    module = module || {};
    var target = resolve(String(name).split("/"), module.parent, true);
    if (!(target.id in cache)) {
      // An empty exports object first, so circular requires end.
      cache[target.id] = {};
      try {
        var fn = hostCompileModule(target.current, target.id);
        fn.call(G, target, target.exports, function (n) { return requireFrom(n, target); });
      } catch (e) {
        throw ["error", "compilation_error", "Module require('" + name + "') raised error " + errstr(e)];
      }
      cache[target.id] = target.exports;
    }
    return cache[target.id];
  }

  if (root !== null) {
    G.require = function require(name) { return requireFrom(name, undefined); };
  }

  // Maps one document (its JSON text) with fn, all in this realm: the rows it emitted, as JSON text.
  function mapDocument(fn, docText, after) {
    collected = [];
    try {
      fn(parse(docText));
      after();
      return stringify(collected);
    } finally {
      collected = null;
    }
  }

  return {
    parse: parse,
    root: root,
    mapDocument: mapDocument,
    splitKVs: function (kvs) {
      var n = kvs.length, keys = new Array(n), values = new Array(n);
      for (var i = 0; i < n; i++) {
        keys[i] = kvs[i][0];
        values[i] = kvs[i][1];
      }
      return [keys, values];
    }
  };
})
)JS";
