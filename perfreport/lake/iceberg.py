"""Where the lake lives: the embedded folder (SQLite SQL catalog + local warehouse) or a named pyiceberg catalog.

``--lake DIR`` is the embedded lake: ``DIR/catalog.db`` and ``DIR/warehouse``. ``--lake catalog:NAME`` is a
catalog configured by name the way pyiceberg configures catalogs (``.pyiceberg.yaml`` in $PYICEBERG_HOME, ~ or
the working directory, or ``PYICEBERG_CATALOG__NAME__*`` variables): a REST catalog, SQL on PostgreSQL, Glue...
The tables are the same in both: namespace ``perfreport``, tables ``kernels``, ``captures``, ``cells``,
``publications``.
"""

from __future__ import annotations

import contextlib
import os
import time
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from perfreport.errors import PerfReportError
from perfreport.lake.damage import catalog_damaged, metadata_damaged, newest_metadata, not_a_folder, read_errors
from perfreport.lake.rows import SCHEMAS

NAMESPACE = "perfreport"
WAREHOUSE_TABLES = "/warehouse/perfreport/"
LAKE_ENV = "PERFREPORT_LAKE"
DEFAULT_LAKE = Path("lake")
NAMED = "catalog:"
TABLES = ("kernels", "captures", "cells", "trials", "kernel_history", "predictions", "publications")  # the ledger last
APPEND_ONLY = ("kernel_history", "predictions", "publications")  # appended by each publish; others replace a cell
SNAPSHOT_RETENTION = timedelta(days=7)
TABLE_PROPERTIES = {
    "format-version": "2",
    "commit.manifest-merge.enabled": "true",
    "history.expire.max-snapshot-age-ms": str(int(SNAPSHOT_RETENTION.total_seconds() * 1000)),
}

Lake = Path | str  # an embedded lake folder, or "catalog:NAME"


def resolve_lake(lake: str | Path | None) -> Lake:
    """Return the lake: the option, else $PERFREPORT_LAKE, else ./lake (a folder made absolute, or catalog:NAME)."""
    value = str(lake) if lake is not None else os.environ.get(LAKE_ENV) or str(DEFAULT_LAKE)
    if value.startswith(NAMED):
        name = value[len(NAMED):]
        if not name or not name.replace("_", "").replace("-", "").isalnum():
            raise PerfReportError(f"lake {value!r}: expected catalog:NAME with NAME a pyiceberg catalog name "
                                  f"(letters, digits, _ or -). Example: --lake catalog:team")
        return value
    if value.startswith("file://"):
        value = value[len("file://"):]
    elif "://" in value:
        raise PerfReportError(
            f"lake {value!r}: a URI is not a lake location; --lake takes only the embedded lake (a folder path) or "
            f"catalog:NAME, a pyiceberg catalog configured by name (REST, SQL on PostgreSQL: put the URI in "
            f".pyiceberg.yaml or PYICEBERG_CATALOG__NAME__URI). docs/lake.md shows both.")
    return Path(value).expanduser().resolve()


def is_named(lake: Lake) -> bool:
    """True for catalog:NAME, False for an embedded lake folder."""
    return isinstance(lake, str) and lake.startswith(NAMED)


def _named_catalog(lake: str) -> Any:
    from pyiceberg.catalog import load_catalog
    from pyiceberg.exceptions import NotInstalledError
    from pyiceberg.utils.config import Config

    name = lake[len(NAMED):]
    conf = Config().get_catalog_config(name)  # read now: pyiceberg's own copy is read once, at import
    if not conf:
        raise PerfReportError(
            f"lake {lake!r}: no catalog {name!r} configured. Set PYICEBERG_CATALOG__{name.upper()}__URI (and "
            f"__TYPE, __WAREHOUSE, credentials), or add `catalog: {name}: ...` to .pyiceberg.yaml in "
            f"$PYICEBERG_HOME, ~ or the working directory (docs/lake.md, 'Shared catalogs').")
    props = {k: v for k, v in conf.items() if isinstance(v, str)}
    try:
        return load_catalog(name, **props)
    except NotInstalledError as exc:
        missing = f" ({exc.__cause__})" if exc.__cause__ else ""
        raise PerfReportError(
            f"lake {lake!r}: catalog {name!r} (type {props.get('type', '?')}) needs a package that is not "
            f"installed{missing}. Install the team extra: pip install 'perfreport[team]' (`pip install -e '.[team]'` "
            f"in a checkout): the PostgreSQL driver for postgresql+psycopg2:// URIs and s3fs; a URI naming another "
            f"driver needs that driver.") from None


def catalog_unreachable(lake: str, exc: BaseException) -> PerfReportError:
    """A named SQL catalog whose database refused the connection (down, wrong host, port, user or password) or
    failed to set up pyiceberg's tables."""
    from pyiceberg.utils.config import Config
    from sqlalchemy.engine import make_url

    name = lake[len(NAMED):]
    uri = str((Config().get_catalog_config(name) or {}).get("uri", "?"))
    with contextlib.suppress(Exception):
        uri = make_url(uri).render_as_string(hide_password=True)
    detail = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return PerfReportError(
        f"lake {lake!r}: cannot use the catalog database {uri} ({detail[0] if detail else type(exc).__name__}). "
        f"Check that the server is up, the URI's host, port, user and password (PYICEBERG_CATALOG__"
        f"{name.upper().replace('-', '_')}__URI, or `uri` of catalog {name} in .pyiceberg.yaml; docs/lake.md, "
        f"'Shared catalogs') and that the user may create tables there, then run the command again.")


def _embedded_catalog(lake: Path) -> Any:
    from pyiceberg.catalog.sql import SqlCatalog

    (lake / "warehouse").mkdir(parents=True, exist_ok=True)
    # file:// + the plain path, not Path.as_uri(): pyiceberg's local FileIO does not percent-decode, so a lake
    # under "my lakes/" would land in a folder literally named "my%20lakes".
    return SqlCatalog(NAMESPACE, uri=f"sqlite:///{lake / 'catalog.db'}", warehouse=f"file://{lake / 'warehouse'}")


def open_catalog(lake: Lake, check_moved: bool = True) -> Any:
    """Open the lake's catalog (creating the embedded one and the namespace when absent).

    An embedded lake whose metadata still points at another folder (it was moved or copied) is an error naming
    `lake relocate`: reading it would fail on the first missing file, writing it would mix two places.
    """
    from pyiceberg.exceptions import NamespaceAlreadyExistsError
    from sqlalchemy.exc import DatabaseError, IntegrityError, OperationalError

    folder = None if is_named(lake) else Path(lake).expanduser().resolve()
    if folder is not None:
        _refuse_damaged(folder)
    # First writers of a fresh lake race on CREATE TABLE and the namespace row; SQLite's busy is an OperationalError.
    # A database server that keeps refusing (down, wrong password) fails after 3 quick tries, with the URI to check.
    attempts = 10 if folder is not None else 3
    for attempt in range(attempts):
        try:
            catalog = _named_catalog(str(lake)) if folder is None else _embedded_catalog(folder)
            if folder is not None and (NAMESPACE,) not in catalog.list_namespaces() and newest_metadata(folder):
                # A catalog without our namespace while tables remain: catalog.db was emptied or replaced (a first
                # publish creates the namespace before any table file, so this is no race with one).
                raise catalog_damaged(folder / "catalog.db", None)
            with contextlib.suppress(NamespaceAlreadyExistsError, IntegrityError):
                catalog.create_namespace_if_not_exists(NAMESPACE)
            if check_moved and folder is not None:
                _refuse_moved(folder, catalog)
            return catalog
        except OperationalError as exc:
            if attempt == attempts - 1:
                if folder is None:
                    raise catalog_unreachable(str(lake), exc) from None
                raise
            time.sleep(0.05 * (attempt + 1))
        except DatabaseError as exc:  # "file is not a database", "database disk image is malformed"
            if folder is not None:
                raise catalog_damaged(folder / "catalog.db", exc) from None
            # a server catalog: two first opens both creating pyiceberg's tables ("already exists")
            if attempt == attempts - 1:
                raise catalog_unreachable(str(lake), exc) from None
            time.sleep(0.05 * (attempt + 1))
    raise AssertionError("unreachable")


def _refuse_damaged(folder: Path) -> None:
    """Refuse a lake path that is a file, and a catalog.db deleted or emptied while the tables remain (opening it
    would write a new catalog: a publish would start a second history beside the first)."""
    if folder.exists() and not folder.is_dir():
        raise not_a_folder(folder)
    db = folder / "catalog.db"
    if (not db.exists() or (db.is_file() and db.stat().st_size == 0)) and newest_metadata(folder):
        raise catalog_damaged(db, None)


def _refuse_moved(lake: Path, catalog: Any) -> None:
    old = moved_from(lake, catalog)
    if old is not None:
        raise PerfReportError(
            f"lake {str(lake)!r}: its Iceberg metadata holds absolute paths under {old!r}: the lake folder was moved "
            f"or copied. Run `perftunereport lake relocate --lake {lake}` once to rewrite them for the new place.")


def open_lake(lake: str | Path | None) -> tuple[Lake, Any]:
    """Return the lake and its catalog; an embedded lake with no catalog.db is an error naming the fix."""
    where = resolve_lake(lake)
    if isinstance(where, Path):
        _refuse_damaged(where)
    if isinstance(where, Path) and not (where / "catalog.db").is_file():
        raise PerfReportError(f"lake {str(where)!r}: no catalog.db there; publish first with "
                              f"`perftunereport publish_to_lake --campaign DIR --lake {where}`.")
    return where, open_catalog(where)


def _create(catalog: Any, name: str) -> None:
    from pyiceberg.exceptions import CommitFailedException, TableAlreadyExistsError
    from sqlalchemy.exc import OperationalError

    for attempt in range(10):
        try:
            with catalog.create_table_transaction(f"{NAMESPACE}.{name}", schema=SCHEMAS[name],
                                                  properties=TABLE_PROPERTIES) as tx, tx.update_spec() as spec:
                spec.add_identity("campaign")
            return
        except (TableAlreadyExistsError, CommitFailedException):
            return  # another writer created it first ("Table already exists"): same schema, use theirs
        except OperationalError:  # SQLite busy with another writer's create
            if attempt == 9:
                raise
            time.sleep(0.05 * (attempt + 1))


def load_tables(catalog: Any, names: tuple[str, ...] | list[str], create: bool = False) -> dict[str, Any]:
    """Load tables as of ONE moment of the catalog (one SELECT on SQL catalogs); create absent ones if asked.

    A publish switches all tables in one catalog transaction; reading their locations in one statement means a
    reader never pairs one publish's kernels with another's cells.
    """
    found = _load_consistent(catalog, list(names))
    missing = [n for n in names if n not in found]
    if missing and create:
        for name in missing:
            _create(catalog, name)
        found = _load_consistent(catalog, list(names))
    return found


def _load_consistent(catalog: Any, names: list[str]) -> dict[str, Any]:
    from pyiceberg.catalog.sql import IcebergTables, SqlCatalog
    from pyiceberg.exceptions import NoSuchTableError

    if not isinstance(catalog, SqlCatalog):
        out = {}
        for name in names:
            with contextlib.suppress(NoSuchTableError):
                out[name] = catalog.load_table(f"{NAMESPACE}.{name}")
        return out
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    with Session(catalog.engine) as session:
        rows = session.scalars(select(IcebergTables).where(
            IcebergTables.catalog_name == catalog.name, IcebergTables.table_namespace == NAMESPACE,
            IcebergTables.table_name.in_(names))).all()
    out = {}
    for row in rows:
        if not row.metadata_location:
            continue
        try:
            out[row.table_name] = catalog._convert_orm_to_iceberg(row)
        except read_errors() as exc:
            db = catalog.engine.url.database if catalog.engine.dialect.name == "sqlite" else None
            raise metadata_damaged(row.table_name, row.metadata_location, row.previous_metadata_location, db,
                                   exc) from None
    return out


def load_table(catalog: Any, name: str) -> Any:
    """Load perfreport.<name>, creating it (schema, properties, campaign partition) when absent."""
    return load_tables(catalog, [name], create=True)[name]


def catalog_rows(catalog: Any) -> list[Any]:
    """Return the catalog's rows of our namespace's tables (name and metadata location)."""
    from pyiceberg.catalog.sql import IcebergTables
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    with Session(catalog.engine) as session:
        return list(session.scalars(select(IcebergTables).where(
            IcebergTables.catalog_name == catalog.name, IcebergTables.table_namespace == NAMESPACE)).all())


def _root_of(location: str) -> str:
    """Return the lake folder a metadata location lives under (…/<lake>/warehouse/perfreport/<table>/…)."""
    path = unquote(urlparse(location).path) if location.startswith("file:") else location
    if WAREHOUSE_TABLES not in path:
        raise PerfReportError(f"metadata location {location!r} is not under <lake>{WAREHOUSE_TABLES}; pass the old "
                              f"lake folder with --from.")
    return path[:path.rindex(WAREHOUSE_TABLES)]


def moved_from(lake: Path, catalog: Any) -> str | None:
    """Return the old lake folder the catalog still points at, or None when the lake is at its place."""
    roots = {_root_of(row.metadata_location) for row in catalog_rows(catalog) if row.metadata_location}
    roots.discard(str(lake))
    if len(roots) > 1:
        raise PerfReportError(f"lake {str(lake)!r}: tables point at several old folders ({', '.join(sorted(roots))});"
                              f" relocate once per folder with --from OLD.")
    return roots.pop() if roots else None
