"""The adapter package's layout (docs/design.md#code-layout), read from the source: every import
between its packages runs down the layers, no modules import each other in a loop, and modules,
classes and functions stay within the sizes a reader takes in at once."""

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).parents[2] / "dbt" / "adapters" / "chaintable"
PREFIX = "dbt.adapters.chaintable"

# lowest first; a package imports only packages of lower layers (one layer's may not import
# each other either)
LAYERS = [
    {"base"},
    {"chain", "merge"},
    {"cumulative"},
    {"read"},
    {"view", "history"},
    {"publish"},
    {"write"},
    {"compaction", "expiration"},
    {"operations", "run", "connections"},
    {"batch"},
    {"impl"},
    {"__init__"},
]
MAX_MODULE, MAX_CLASS, MAX_FUNCTION = 400, 300, 60
# (module path below the package, definition): why it may stay longer; none needs to today
LONG: dict[tuple[str, str], str] = {}


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports(path: Path, names: set[str]) -> set[str]:
    """The package's modules `path` imports (from X import module counts as X.module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PREFIX):
            base = node.module[len(PREFIX) :].lstrip(".")
            for alias in node.names:
                sub = f"{base}.{alias.name}".lstrip(".")
                found.add(sub if sub in names else base)
    return {m for m in found if m}


def layer(module: str) -> int:
    top = module.split(".")[0]
    return next(i for i, packages in enumerate(LAYERS) if top in packages)


def test_every_package_is_on_a_layer():
    assert {m.split(".")[0] for m in modules()} - {"__version__"} <= set().union(*LAYERS)


def test_imports_between_packages_run_down_the_layers():
    mods = modules()
    up = [
        f"{m} -> {target}"
        for m, path in mods.items()
        if m != "__version__"
        for target in imports(path, set(mods))
        if target.split(".")[0] != m.split(".")[0] and layer(target) >= layer(m)
    ]
    assert up == []


def test_no_modules_import_each_other_in_a_loop():
    mods = modules()
    graph = {m: imports(p, set(mods)) & set(mods) for m, p in mods.items()}
    state: dict[str, int] = defaultdict(int)  # 0 unseen, 1 on the path, 2 done
    loops = []

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for t in sorted(graph[m]):
            if state[t] == 1:
                loops.append(path[path.index(t) :] + [t])
            elif state[t] == 0:
                visit(t, [*path, t])
        state[m] = 2

    for m in sorted(graph):
        if state[m] == 0:
            visit(m, [m])
    assert loops == []


def test_modules_classes_and_functions_stay_short():
    over, allowed = [], set()
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        text = path.read_text()
        if len(text.splitlines()) > MAX_MODULE:
            over.append(f"{rel}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
                limit = MAX_CLASS if isinstance(node, ast.ClassDef) else MAX_FUNCTION
                size = node.end_lineno - node.lineno + 1
                if size > limit:
                    if (rel, node.name) in LONG:
                        allowed.add((rel, node.name))
                    else:
                        over.append(f"{rel}: {node.name} {size} lines")
    assert over == []
    assert allowed == set(LONG), "an allowed long definition is short now: drop it from LONG"


def test_every_statement_goes_through_the_runner_and_only_the_lock_skips_its_guard():
    """One door (docs/design.md#crash-safety-and-locking): the adapter sends SQL only through
    base/runner.py, whose run() refuses a change of the catalog without the chain's lock; the
    statements on the lock itself (taking, breaking, renewing it) are the only ones sent
    around that check, and only the lock's modules send them."""
    sends, on_lock = [], []
    for module, path in modules().items():
        text = path.read_text()
        if module not in ("base.runner", "connections") and any(
            call in text for call in ("add_query(", "adapter.execute(", "cursor.execute(")
        ):
            sends.append(module)
        if module != "base.runner" and "run_on_lock(" in text:
            on_lock.append(module)
    assert sends == []
    assert sorted(on_lock) == ["publish.lease", "publish.lock"]


def calls_of(path: Path) -> set[str]:
    """`obj.method` of every call in `path` whose receiver is a plain name or attribute (the
    receiver's last name: `self.unit.locked(...)` -> `unit.locked`)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            receiver = node.func.value
            name = getattr(receiver, "attr", None) or getattr(receiver, "id", None)
            if name:
                found.add(f"{name}.{node.func.attr}")
    return found


def test_every_writer_takes_the_lock_and_tells_the_derived_tables_through_the_write_unit():
    """One door (docs/design.md#the-write-unit): only write/unit.py takes the chain's lock, and
    only write/derived.py tells the cumulative delta and the stored changes of a write."""
    doors = {
        "lock.locked": {"write.unit"},
        "accumulator.before_write": {"write.derived"},
        "accumulator.after_write": {"write.derived"},
        "store.before_write": {"write.derived"},
        "store.after_write": {"write.derived"},
    }
    found: dict[str, set[str]] = {call: set() for call in doors}
    for module, path in modules().items():
        for call in calls_of(path) & set(doors):
            found[call].add(module)
    assert found == doors


def test_the_layout_table_of_the_design_doc_names_every_module():
    """docs/design.md's code layout table: a row per package (`merge/engines/` too), naming
    each of its modules."""
    import re

    doc = (PACKAGE.parents[2] / "docs" / "design.md").read_text()
    rows = dict(re.findall(r"^\| `([\w/]+)/` \| (.*) \|$", doc, re.M))
    named = {pkg: set(re.findall(r"`(\w+)\.py`", text)) for pkg, text in rows.items()}
    packages = {
        d.relative_to(PACKAGE).as_posix(): {f.stem for f in d.glob("*.py") if f.stem != "__init__"}
        for d in PACKAGE.rglob("*")
        if (d / "__init__.py").exists()
    }
    assert named == packages


# reading a model's config lies below merge/ (base/): these check an engine's options by its
# name until that reading moves beside the engines
ENGINE_NAMES_READ_FROM_CONFIG = {"base.options", "base.option_rules"}


def test_no_module_outside_the_engines_compares_an_engine_name():
    """What an engine does is asked of its object (merge/engines/), never decided by comparing
    merge_engine with a name."""
    from dbt.adapters.chaintable.base.keys import MERGE_ENGINES

    def names(node: ast.AST) -> set[str]:
        if isinstance(node, ast.Constant) and node.value in MERGE_ENGINES:
            return {node.value}
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return set().union(*(names(e) for e in node.elts)) if node.elts else set()
        return set()

    found = set()
    for module, path in modules().items():
        if module.startswith("merge.engines"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare) and any(
                names(n) for n in [node.left, *node.comparators]
            ):
                found.add(module)
    assert found == ENGINE_NAMES_READ_FROM_CONFIG
