#!/usr/bin/env python3
"""The public API of a crate, from rustdoc's JSON, as sorted text lines; and the semver rule.

    api_check.py render JSON                    print the API, one item a line
    api_check.py check JSON BASELINE [--bless]  compare with BASELINE (first line: `version X.Y.Z`)

A line is `<kind> <path>[<TAB><signature>]`; its key is what precedes the tab. Items are
reached from the crate root through public modules and re-exports (globs included), as users
reach them; `#[doc(hidden)]` items are not API (rustdoc leaves them out). Recorded: functions and
methods (qualifiers, generics, parameter types, return type), public struct fields and whether
private fields exist, enum variants, trait items (required or provided), constants', statics'
and aliases' types, and every trait impl of a public type (auto traits included: losing `Send`
breaks users; blanket impls are not listed, they follow from the rest). Types are written by
their defining path (rustdoc's `paths`), so moving a type to another module reads as a change,
conservatively.

The rule (docs/PUBLISHING.md), version B in the baseline, V the crate's:
- breaking: an item removed or its signature changed, a required trait item added, a variant
  added to an exhaustive enum, a public field added to a struct without private fields or
  `#[non_exhaustive]`: V must be B with its first non-zero component increased
  (1.2.3 -> 2.0.0, 0.2.3 -> 0.3.0, 0.0.3 -> 0.0.4);
- additions only: V must be greater than B (a patch bump at least);
- no change: passes.
`--bless` writes the current API with V as the new baseline (after a release, or to accept a
change deliberately before the first one).
"""

import json
import sys


def die(msg):
    print(f"api-check: {msg}", file=sys.stderr)
    sys.exit(2)


class Api:
    def __init__(self, doc):
        self.doc = doc
        self.index = doc["index"]
        self.paths = doc.get("paths", {})
        self.lines = set()
        self.seen = set()

    # ---- types -------------------------------------------------------------------------------

    def path_name(self, p):
        """A resolved path: its defining path when rustdoc knows it, else as written."""
        pid = p.get("id")
        summ = self.paths.get(str(pid)) if pid is not None else None
        name = "::".join(summ["path"]) if summ else (p.get("path") or p.get("name") or "?")
        return name + self.generic_args(p.get("args"))

    def generic_args(self, a):
        if not a:
            return ""
        if "angle_bracketed" in a:
            ab = a["angle_bracketed"]
            parts = [self.generic_arg(x) for x in ab.get("args", [])]
            for c in ab.get("constraints", ab.get("bindings", [])):
                binding = c.get("binding")
                name = c["name"] + self.generic_args(c.get("args"))
                if "equality" in binding:
                    parts.append(f"{name} = {self.term(binding['equality'])}")
                else:
                    parts.append(f"{name}: {self.bounds(binding.get('constraint', []))}")
            return "<" + ", ".join(parts) + ">" if parts else ""
        if "parenthesized" in a:
            pa = a["parenthesized"]
            out = pa.get("output")
            s = "(" + ", ".join(self.ty(t) for t in pa["inputs"]) + ")"
            return s + (" -> " + self.ty(out) if out else "")
        if a == "return_type_notation":
            return "(..)"
        return "<?>"

    def generic_arg(self, x):
        if isinstance(x, str):
            return x  # "infer"
        if "lifetime" in x:
            return x["lifetime"]
        if "type" in x:
            return self.ty(x["type"])
        if "const" in x:
            c = x["const"]
            return c.get("expr", "?") if isinstance(c, dict) else str(c)
        return "_"

    def term(self, t):
        if "type" in t:
            return self.ty(t["type"])
        c = t.get("constant", {})
        return c.get("expr", "?")

    def bounds(self, bs):
        return " + ".join(self.bound(b) for b in bs)

    def bound(self, b):
        if "trait_bound" in b:
            tb = b["trait_bound"]
            mod = tb.get("modifier", "none")
            pre = {"maybe": "?", "maybe_const": "~const "}.get(mod, "")
            hr = self.hrtb(tb.get("generic_params", []))
            return hr + pre + self.path_name(tb["trait"])
        if "outlives" in b:
            return b["outlives"]
        if "use" in b:
            return "use<" + ", ".join(u if isinstance(u, str) else str(u) for u in b["use"]) + ">"
        return "?"

    def hrtb(self, params):
        names = [p["name"] for p in params]
        return f"for<{', '.join(names)}> " if names else ""

    def ty(self, t):
        if t is None:
            return "()"
        if isinstance(t, str):
            return t  # "infer"
        (k, v), = t.items()
        if k == "resolved_path":
            return self.path_name(v)
        if k == "dyn_trait":
            s = " + ".join(self.hrtb(p.get("generic_params", [])) + self.path_name(p["trait"])
                           for p in v["traits"])
            return "dyn " + s + (" + " + v["lifetime"] if v.get("lifetime") else "")
        if k == "generic":
            return v
        if k == "primitive":
            return v
        if k == "function_pointer":
            sig = v.get("sig", v.get("decl"))
            h = self.header(v.get("header", {}))
            return self.hrtb(v.get("generic_params", [])) + h + "fn" + self.sig(sig)
        if k == "tuple":
            return "(" + ", ".join(self.ty(x) for x in v) + ("," if len(v) == 1 else "") + ")"
        if k == "slice":
            return "[" + self.ty(v) + "]"
        if k == "array":
            return f"[{self.ty(v['type'])}; {v['len']}]"
        if k == "pat":
            return self.ty(v["type"])
        if k == "impl_trait":
            return "impl " + self.bounds(v)
        if k == "infer":
            return "_"
        if k == "raw_pointer":
            mut = v.get("is_mutable", v.get("mutable"))
            return ("*mut " if mut else "*const ") + self.ty(v["type"])
        if k == "borrowed_ref":
            mut = v.get("is_mutable", v.get("mutable"))
            lt = (v["lifetime"] + " ") if v.get("lifetime") else ""
            return "&" + lt + ("mut " if mut else "") + self.ty(v["type"])
        if k == "qualified_path":
            tr = v.get("trait")
            base = self.ty(v["self_type"])
            inner = f"<{base} as {self.path_name(tr)}>" if tr else base
            return inner + "::" + v["name"] + self.generic_args(v.get("args"))
        return f"<{k}>"

    # ---- signatures --------------------------------------------------------------------------

    def header(self, h):
        out = []
        if h.get("is_const", h.get("const")):
            out.append("const")
        if h.get("is_async", h.get("async")):
            out.append("async")
        if h.get("is_unsafe", h.get("unsafe")):
            out.append("unsafe")
        abi = h.get("abi", "Rust")
        if abi != "Rust":
            name = abi if isinstance(abi, str) else next(iter(abi))
            out.append(f'extern "{name}"')
        return "".join(x + " " for x in out)

    def sig(self, s):
        ins = [self.ty(t) for _, t in s["inputs"]]
        if s.get("is_c_variadic", s.get("c_variadic")):
            ins.append("...")
        out = s.get("output")
        return "(" + ", ".join(ins) + ")" + (" -> " + self.ty(out) if out else "")

    def generics(self, g):
        ps = []
        for p in g.get("params", []):
            kind = p["kind"]
            if "lifetime" in kind:
                outl = kind["lifetime"].get("outlives", [])
                ps.append(p["name"] + (": " + " + ".join(outl) if outl else ""))
            elif "type" in kind:
                tk = kind["type"]
                if tk.get("is_synthetic", tk.get("synthetic")):
                    continue  # an `impl Trait` argument, rendered in place
                b = self.bounds(tk.get("bounds", []))
                ps.append(p["name"] + (": " + b if b else ""))
            elif "const" in kind:
                ps.append(f"const {p['name']}: {self.ty(kind['const']['type'])}")
        where = []
        for w in g.get("where_predicates", []):
            if "bound_predicate" in w:
                bp = w["bound_predicate"]
                hr = self.hrtb(bp.get("generic_params", []))
                where.append(f"{hr}{self.ty(bp['type'])}: {self.bounds(bp['bounds'])}")
            elif "lifetime_predicate" in w:
                lp = w["lifetime_predicate"]
                where.append(f"{lp['lifetime']}: {' + '.join(lp['outlives'])}")
            elif "eq_predicate" in w:
                ep = w["eq_predicate"]
                where.append(f"{self.ty(ep['lhs'])} = {self.term(ep['rhs'])}")
        s = "<" + ", ".join(ps) + ">" if ps else ""
        return s, (" where " + ", ".join(where) if where else "")

    def fn_sig(self, f):
        g, w = self.generics(f.get("generics", {}))
        return self.header(f.get("header", {})) + "fn" + g + self.sig(f.get("sig", f.get("decl"))) + w

    # ---- items -------------------------------------------------------------------------------

    def add(self, kind, path, sig=None):
        sig = " ".join(sig.split()) if sig is not None else ""
        self.lines.add(f"{kind} {path}" + (f"\t{sig}" if sig else ""))

    @staticmethod
    def non_exhaustive(item):
        return any("non_exhaustive" in json.dumps(a) for a in item.get("attrs", []))

    def walk(self, iid, path, name=None):
        item = self.index.get(str(iid))
        if item is None:
            return
        name = name or item.get("name")
        (kind, inner), = item["inner"].items()
        here = f"{path}::{name}" if path else name
        key = (str(iid), here)
        if key in self.seen:
            return
        self.seen.add(key)
        if kind == "module":
            if path:
                self.add("mod", here)
            for c in inner["items"]:
                self.member(c, here)
        elif kind == "function":
            self.add("fn", here, self.fn_sig(inner))
        elif kind == "struct":
            self.struct(here, item, inner)
        elif kind == "union":
            g, w = self.generics(inner.get("generics", {}))
            self.add("union", here, g + w)
            self.fields(here, inner.get("fields", []), inner.get("has_stripped_fields", False))
            self.impls(here, inner.get("impls", []))
        elif kind == "enum":
            g, w = self.generics(inner.get("generics", {}))
            ex = "non_exhaustive" if self.non_exhaustive(item) else "exhaustive"
            self.add("enum", here, f"{ex} {g}{w}")
            for v in inner["variants"]:
                self.variant(here, v)
            self.impls(here, inner.get("impls", []))
        elif kind == "trait":
            self.trait(here, inner)
        elif kind == "type_alias":
            g, w = self.generics(inner.get("generics", {}))
            self.add("type", here, g + " = " + self.ty(inner["type"]) + w)
        elif kind == "constant":
            self.add("const", here, self.ty(inner["type"]))
        elif kind == "static":
            mut = inner.get("is_mutable", inner.get("mutable"))
            self.add("static", here, ("mut " if mut else "") + self.ty(inner["type"]))
        elif kind == "macro":
            self.add("macro", here)
        elif kind == "proc_macro":
            self.add("proc_macro", here)
        elif kind in ("trait_alias", "extern_type"):
            self.add(kind, here)

    def member(self, cid, path):
        c = self.index.get(str(cid))
        if c is None:
            return
        if "use" in c["inner"]:
            u = c["inner"]["use"]
            target = u.get("id")
            if u.get("is_glob", u.get("glob")):
                t = self.index.get(str(target)) if target is not None else None
                if t is not None and "module" in t["inner"]:
                    for g in t["inner"]["module"]["items"]:
                        self.member(g, path)
                else:
                    self.add("use", f"{path}::*", u["source"])
            elif target is not None and str(target) in self.index:
                self.walk(target, path, u["name"])
            else:
                self.add("use", f"{path}::{u['name']}", u["source"])
            return
        if c.get("visibility") != "public":
            return
        self.walk(cid, path)

    def struct(self, here, item, inner):
        g, w = self.generics(inner.get("generics", {}))
        sk = inner["kind"]
        if sk == "unit":
            self.add("struct", here, f"unit {g}{w}")
            fields, stripped = [], False
        elif "tuple" in sk:
            ids = sk["tuple"]
            fields = [f for f in ids if f is not None]
            stripped = len(fields) < len(ids)
            self.add("struct", here, f"tuple({len(ids)}) {g}{w}")
        else:
            p = sk["plain"]
            fields, stripped = p["fields"], p.get("has_stripped_fields", p.get("fields_stripped"))
            self.add("struct", here, f"plain {g}{w}")
        if self.non_exhaustive(item):
            stripped = True
        self.fields(here, fields, stripped)
        self.impls(here, inner.get("impls", []))

    def fields(self, here, ids, stripped):
        for f in ids:
            fi = self.index.get(str(f))
            if fi is not None and fi.get("visibility") == "public":
                self.add("field", f"{here}.{fi['name']}", self.ty(fi["inner"]["struct_field"]))
        self.add("fields", here, "open" if stripped else "exhaustive")

    def variant(self, enum, vid):
        v = self.index[str(vid)]
        vk = v["inner"]["variant"]["kind"]
        here = f"{enum}::{v['name']}"
        if vk == "plain":
            self.add("variant", here)
        elif "tuple" in vk:
            tys = [self.ty(self.index[str(f)]["inner"]["struct_field"]) if f is not None else "_"
                   for f in vk["tuple"]]
            self.add("variant", here, "(" + ", ".join(tys) + ")")
        else:
            st = vk["struct"]
            self.add("variant", here, "{..}")
            self.fields(here, st["fields"], st.get("has_stripped_fields", st.get("fields_stripped")))

    def trait(self, here, inner):
        g, w = self.generics(inner.get("generics", {}))
        flags = ("unsafe " if inner.get("is_unsafe") else "") + ("auto " if inner.get("is_auto") else "")
        sup = self.bounds(inner.get("bounds", []))
        self.add("trait", here, flags + g + (": " + sup if sup else "") + w)
        for i in inner["items"]:
            it = self.index[str(i)]
            (k, v), = it["inner"].items()
            ih = f"{here}::{it['name']}"
            if k == "function":
                req = "provided" if v.get("has_body") else "required"
                self.add("trait-fn", ih, f"{self.fn_sig(v)} {req}")
            elif k == "assoc_type":
                req = "provided" if v.get("type") is not None else "required"
                b = self.bounds(v.get("bounds", []))
                self.add("trait-type", ih, (b + " " if b else "") + req)
            elif k == "assoc_const":
                req = "provided" if v.get("value", v.get("default")) is not None else "required"
                self.add("trait-const", ih, f"{self.ty(v['type'])} {req}")

    def impls(self, here, ids):
        for i in ids:
            it = self.index.get(str(i))
            if it is None:
                continue
            im = it["inner"]["impl"]
            if im.get("blanket_impl") is not None:
                continue
            # Auto traits rustdoc derives: the stable ones only (Freeze, UnsafeUnpin and the like
            # come and go with the toolchain).
            if im.get("is_synthetic", im.get("synthetic")) and im["trait"]["path"].split("::")[-1] \
                    not in ("Send", "Sync", "Unpin", "UnwindSafe", "RefUnwindSafe"):
                continue
            g, w = self.generics(im.get("generics", {}))
            if im.get("trait") is None:
                for m in im["items"]:
                    mi = self.index.get(str(m))
                    if mi is None or mi.get("visibility") != "public":
                        continue
                    (k, v), = mi["inner"].items()
                    mh = f"{here}::{mi['name']}"
                    pre = f"impl{g} {self.ty(im['for'])}{w} "
                    if k == "function":
                        self.add("method", mh, pre + self.fn_sig(v))
                    elif k == "assoc_const":
                        self.add("assoc-const", mh, pre + self.ty(v["type"]))
                    elif k == "assoc_type":
                        self.add("assoc-type", mh, pre)
            else:
                neg = "!" if im.get("is_negative", im.get("negative")) else ""
                unsafe = "unsafe " if im.get("is_unsafe") else ""
                self.add("impl", f"{unsafe}{g} {neg}{self.path_name(im['trait'])} for "
                         f"{self.ty(im['for'])}{w}".strip())


def render(doc):
    api = Api(doc)
    api.walk(doc["root"], "")
    crate = doc["index"][str(doc["root"])]["name"]
    return crate, sorted(api.lines)


def parse_version(s):
    try:
        core = s.split("-")[0].split("+")[0]
        major, minor, patch = (int(x) for x in core.split("."))
        return major, minor, patch
    except ValueError:
        die(f"version {s!r} is not X.Y.Z")


def breaking_bump_ok(base, cur):
    """cur is base with its first non-zero component raised (or anything beyond that)."""
    b, c = parse_version(base), parse_version(cur)
    if b[0] > 0:
        return c[0] > b[0]
    if b[1] > 0:
        return c[:1] > b[:1] or c[1] > b[1]
    return c[:2] > b[:2] or c[2] > b[2]


def split(line):
    key, sep, sig = line.partition("\t")
    return key, sig if sep else None


def compare(base_lines, cur_lines):
    """(breaking, added) lists of human-readable changes."""
    base = dict(split(l) for l in base_lines)
    cur = dict(split(l) for l in cur_lines)
    breaking, added = [], []
    for k, sig in sorted(base.items()):
        if k not in cur:
            breaking.append(f"removed: {k}" + (f"  {sig}" if sig else ""))
        elif cur[k] != sig:
            breaking.append(f"changed: {k}\n      was: {sig}\n      now: {cur[k]}")
    for k, sig in sorted(cur.items()):
        if k in base:
            continue
        kind, _, path = k.partition(" ")
        owner = path.rsplit("::", 1)[0] if kind != "field" else path.rsplit(".", 1)[0]
        line = f"added: {k}" + (f"  {sig}" if sig else "")
        if kind == "trait-fn" and sig.endswith(" required") and f"trait {owner}" in base:
            breaking.append(line + " (a required trait item)")
        elif kind in ("trait-type", "trait-const") and sig.endswith("required") and f"trait {owner}" in base:
            breaking.append(line + " (a required trait item)")
        elif kind == "variant" and (base.get(f"enum {owner}") or "").startswith("exhaustive"):
            breaking.append(line + " (a variant of an exhaustive enum)")
        elif kind == "field" and base.get(f"fields {owner}") == "exhaustive":
            breaking.append(line + " (a field of a struct users can build)")
        else:
            added.append(line)
    return breaking, added


def main(argv):
    if len(argv) >= 2 and argv[0] == "render":
        with open(argv[1]) as f:
            _, lines = render(json.load(f))
        print("\n".join(lines))
        return 0
    if len(argv) < 3 or argv[0] != "check":
        die(__doc__.split("\n\n")[1])
    bless = "--bless" in argv
    with open(argv[1]) as f:
        doc = json.load(f)
    version = doc.get("crate_version") or die("the JSON has no crate_version")
    crate, lines = render(doc)
    baseline = argv[2]
    if bless:
        with open(baseline, "w") as f:
            f.write(f"version {version}\n" + "".join(l + "\n" for l in lines))
        print(f"api-check: {crate} {version}: baseline {baseline} written ({len(lines)} lines)")
        return 0
    try:
        with open(baseline) as f:
            head, *base_lines = f.read().splitlines()
    except FileNotFoundError:
        die(f"{crate}: no baseline {baseline}; create it with scripts/api-check.sh --bless")
    if not head.startswith("version "):
        die(f"{baseline}: the first line must be `version X.Y.Z`")
    base_version = head.split()[1]
    breaking, added = compare(base_lines, lines)
    for c in breaking + added:
        print(f"  {crate}: {c}")
    if breaking and not breaking_bump_ok(base_version, version):
        print(f"api-check: {crate}: {len(breaking)} breaking change(s) since {base_version}, but the "
              f"version is {version}: raise its first non-zero component (docs/PUBLISHING.md), "
              f"or accept the change deliberately with scripts/api-check.sh --bless", file=sys.stderr)
        return 1
    if added and parse_version(version) <= parse_version(base_version):
        print(f"api-check: {crate}: {len(added)} addition(s) since {base_version}, but the version "
              f"is still {version}: bump it (a patch bump at least), or accept with "
              f"scripts/api-check.sh --bless", file=sys.stderr)
        return 1
    state = "unchanged" if not (breaking or added) else "changes covered by the version bump"
    print(f"api-check: {crate} {version}: {len(lines)} items, {state} (baseline {base_version})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
