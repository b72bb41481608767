"""Lakekeeper's generic-table API payloads, typed (pydantic), as its OpenAPI document names them.

The contract is ``lakekeeper-api/generic-table-open-api.yaml`` (kebab-case fields). Answers are
read leniently where the server is known to differ (``protected`` may be missing, ``config`` and
``storage-credentials`` may be null) and strictly otherwise: a missing or mistyped field is a
``pydantic.ValidationError``, which the client reports as an unexpected answer.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Payload(BaseModel):
    """A wire payload: kebab-case JSON names, immutable."""

    model_config = ConfigDict(alias_generator=lambda name: name.replace("_", "-"), populate_by_name=True, frozen=True)

    def wire(self) -> dict[str, Any]:
        """The JSON body: kebab-case names, unset optional fields left out."""
        return self.model_dump(by_alias=True, exclude_none=True)


# -- requests -------------------------------------------------------------------------------------


class CreateGenericTableRequest(Payload):
    name: str
    format: str
    base_location: str | None = None
    doc: str | None = None
    properties: dict[str, str] | None = None


class RenameGenericTableTarget(Payload):
    namespace: list[str]
    name: str


class RenameGenericTableRequest(Payload):
    source: RenameGenericTableTarget
    destination: RenameGenericTableTarget


# -- answers --------------------------------------------------------------------------------------


class StorageCredential(Payload):
    prefix: str
    config: dict[str, str] = Field(repr=False)


class GenericTableData(Payload):
    name: str
    format: str
    base_location: str
    doc: str | None = None
    properties: dict[str, str] | None = None
    protected: bool = False


class LoadGenericTableResponse(Payload):
    table: GenericTableData
    config: dict[str, str] | None = Field(default=None, repr=False)
    storage_credentials: list[StorageCredential] | None = None


class LoadGenericTableCredentialsResponse(Payload):
    storage_credentials: list[StorageCredential]


class GenericTableIdentifier(Payload):
    namespace: list[str]
    name: str
    format: str | None = None
    id: str | None = None


class ListGenericTablesResponse(Payload):
    identifiers: list[GenericTableIdentifier]
    next_page_token: str | None = None


class CatalogConfig(Payload):
    """``GET /catalog/v1/config?warehouse=NAME`` (Iceberg REST): the warehouse id is the ``prefix``."""

    defaults: dict[str, str]
    overrides: dict[str, str] | None = None

    @property
    def prefix(self) -> str:
        prefix = (self.overrides or {}).get("prefix") or self.defaults.get("prefix")
        if not prefix:
            raise ValueError("the config names no prefix (warehouse id)")
        return prefix


class GetWarehouseResponse(Payload):
    """``GET /management/v1/warehouse/{id}`` (management API): what names the warehouse."""

    id: str
    name: str
    project_id: str | None = None


class ErrorModel(Payload):
    message: str
    type: str = ""
    code: int = 0
    stack: list[str] = []


class IcebergErrorResponse(Payload):
    error: ErrorModel
