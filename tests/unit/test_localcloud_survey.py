"""The local cloud's plugins in a survey preview, without an engine: an unserved type or function
is written down and answered so the preview goes on; outside a survey, and in an update, it is
refused as before (the real engine drives a survey in tests/integration/test_rehearse.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NoReturn

import grpc
import pytest
from pulumi.runtime.proto import provider_pb2

from stackflow.localcloud.plugin.servicer import ProviderServicer
from stackflow.localcloud.plugin.survey import SURVEY_ENV, Survey, read_survey
from stackflow.localcloud.resources import registry
from stackflow.localcloud.wire import from_struct, to_struct

pytestmark = pytest.mark.unit

# Types and functions no service module serves (a Glue catalog is not among the served families).
TABLE = "aws:glue/catalogTable:CatalogTable"
GET_TABLE = "aws:glue/getCatalogTable:getCatalogTable"
URN = f"urn:pulumi:dev::p::{TABLE}::orders"


class Refused(Exception):
    """What a gRPC abort raises here."""


class Context:
    def abort(self, code: grpc.StatusCode, text: str) -> NoReturn:
        raise Refused(code, text)


def servicer(monkeypatch: pytest.MonkeyPatch, survey: Path | None) -> ProviderServicer:
    if survey is None:
        monkeypatch.delenv(SURVEY_ENV, raising=False)
    else:
        monkeypatch.setenv(SURVEY_ENV, str(survey))
    return ProviderServicer("aws", registry("aws"), "http://127.0.0.1:1")


def check(service: ProviderServicer, news: dict[str, Any]) -> Any:
    request = provider_pb2.CheckRequest(urn=URN, type=TABLE, news=to_struct(news))
    return service.Check(request, Context())


def test_the_survey_writes_down_each_unserved_token_once_and_answers_with_the_programs_inputs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    found = tmp_path / "survey.tsv"
    service = servicer(monkeypatch, found)
    news = {"databaseName": "sales", "tableType": "EXTERNAL_TABLE"}
    assert from_struct(check(service, news).inputs) == news
    create = provider_pb2.CreateRequest(
        urn=URN, type=TABLE, properties=to_struct(news), preview=True
    )
    assert from_struct(service.Create(create, Context()).properties) == news
    invoke = provider_pb2.InvokeRequest(tok=GET_TABLE, args=to_struct({"name": "x"}))
    assert from_struct(getattr(service.Invoke(invoke, Context()), "return")) == {}
    Survey(found).record("resource", TABLE)  # the random plugin's process appends too
    assert read_survey(found) == [
        ("function", GET_TABLE),
        ("resource", TABLE),
    ]


def test_an_update_in_a_survey_and_any_call_outside_one_still_refuse_an_unserved_type(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    surveying = servicer(monkeypatch, tmp_path / "survey.tsv")
    create = provider_pb2.CreateRequest(urn=URN, type=TABLE, properties=to_struct({}))
    with pytest.raises(Refused) as refused:
        surveying.Create(create, Context())
    assert refused.value.args[0] == grpc.StatusCode.UNIMPLEMENTED
    assert f"does not serve {TABLE}" in refused.value.args[1]

    plain = servicer(monkeypatch, None)
    with pytest.raises(Refused) as refused:
        check(plain, {})
    assert f"does not serve {TABLE}" in refused.value.args[1]
    assert read_survey(tmp_path / "absent.tsv") == []


def test_a_served_type_is_checked_as_usual_in_a_survey(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    found = tmp_path / "survey.tsv"
    service = servicer(monkeypatch, found)
    request = provider_pb2.CheckRequest(
        urn="urn:pulumi:dev::p::aws:s3/bucket:Bucket::site",
        type="aws:s3/bucket:Bucket",
        news=to_struct({}),
        randomSeed=b"seed",
    )
    inputs = from_struct(service.Check(request, Context()).inputs)
    assert inputs["bucket"].startswith("site-")  # the auto-name a served type gets
    assert not found.exists()
