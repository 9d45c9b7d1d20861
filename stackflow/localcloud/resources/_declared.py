"""The create/read/update/delete shape most AWS resource types share, declared once.

Most types of the local cloud's aws provider do the same four things: refuse inputs they do not
serve, make one create call and describe what came back, read it again later (AWS's "not found"
codes meaning it is gone), keep its tags exactly as the program says, and delete it (gone already
being no error). A `Shape` names only what differs per type: the boto3 client, the create,
describe and delete calls, AWS's not-found codes, the tag calls (`Tagging`), and how AWS's answer
maps to the type's outputs and observed inputs. `Shape.type(...)` turns it into the registry's
`ResourceType`, so a service module is a table of shapes plus the few calls that are its own.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from stackflow.localcloud.registry import Props, ResourceType
from stackflow.localcloud.resources._shared import (
    error_code,
    input_tags,
    kept,
    observe,
    refuse_unserved,
    tag_changes,
    tag_outputs,
    unless_gone,
)

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

Answer = Mapping[str, Any]
CreateCall = Callable[[Any, Props, "CloudContext"], "str | tuple[str, Props]"]
DescribeCall = Callable[[Any, str, Props], Answer | None]
OutputsOf = Callable[[Answer, "CloudContext"], Props]
ObservedOf = Callable[[Answer, Props], Props]
UpdateCall = Callable[[Any, str, Props, Props, frozenset[str]], object]
DeleteCall = Callable[[Any, str, Props], object]


def found(gone: Collection[str], call: Callable[[], Any]) -> Any:
    """`call()`'s answer, or None when AWS answers with one of the not-found codes in `gone`."""
    try:
        return call()
    except ClientError as exc:
        if error_code(exc) in gone:
            return None
        raise


def first(gone: Collection[str], call: Callable[[], Any], key: str) -> dict[str, Any] | None:
    """The first item under `key` of a describe call's answer; None when there is none or AWS
    answers with one of the not-found codes in `gone`."""
    answer = found(gone, call)
    items = (answer or {}).get(key) or []
    return dict(items[0]) if items else None


@dataclass(frozen=True)
class Tagging:
    """How one service lists, sets and removes a resource's tags.

    Attributes:
        list_call, tag_call, untag_call: the boto3 method names.
        key: the argument that names the resource (e.g. "resourceArn", "QueueUrl").
        by: what fills `key`: "id" (the resource's id) or an output or input's name ("arn").
        field: the tags argument of `tag_call` (and the list answer's field).
        keys: the tag-keys argument of `untag_call`.
        item: the names of a tag's key and value in a list of tags ("Key", "Value"), or None
            when the service takes and gives tags as a map {k: v}.
        answer: the list answer's field when it is not `field` (dotted: a field inside one; a
            list on the way stands for its first item, as ELB's `TagDescriptions`).
        described: the describe answer's field that holds the tags (then no list call is made).
        listed: `key` takes a list of resources (EC2's `Resources=[id]`, ELB's
            `ResourceArns=[arn]`).
        key_item: the untag call takes each key as {key_item: k} (EC2's `Tags=[{"Key": k}]`).
        fixed: arguments every tag call also takes (Route 53's `ResourceType="hostedzone"`).
        wrapped: tags and tag keys go inside {wrapped: [...]} (CloudFront's `Items`).
    """

    list_call: str
    tag_call: str
    untag_call: str
    key: str
    by: str = "arn"
    field: str = "tags"
    keys: str = "tagKeys"
    item: tuple[str, str] | None = None
    answer: str | None = None
    described: str | None = None
    listed: bool = False
    key_item: str | None = None
    fixed: tuple[tuple[str, str], ...] = ()
    wrapped: str | None = None

    def wire(self, tags: Mapping[str, str]) -> Any:
        """`tags` as `tag_call` (and most create calls) take them."""
        if self.item is None:
            return dict(tags)
        name, value = self.item
        items = [{name: str(k), value: str(v)} for k, v in tags.items()]
        return {self.wrapped: items} if self.wrapped else items

    def _call(self, client: Any, method: str, ident: Any, **kwargs: Any) -> Any:
        return getattr(client, method)(**{self.key: ident}, **dict(self.fixed), **kwargs)

    def read(self, client: Any, ident: str, answer: Answer | None = None) -> dict[str, str]:
        """The resource's tags as the cloud has them now (from `answer`, the describe call's,
        where it tells them)."""
        if self.described is not None and answer is not None:
            listed: Any = answer.get(self.described)
        else:
            listed = self._call(client, self.list_call, [ident] if self.listed else ident)
            for part in (self.answer or self.field).split("."):
                if isinstance(listed, list):  # one answer per resource asked for: ours
                    listed = listed[0] if listed else None
                listed = (listed or {}).get(part)
        if isinstance(listed, Mapping) or listed is None:
            return {str(k): str(v) for k, v in (listed or {}).items()}
        name, value = self.item or ("Key", "Value")
        return {str(t[name]): str(t.get(value, "")) for t in listed if name in t}

    def sync(self, client: Any, ident: str, inputs: Props, answer: Answer | None = None) -> None:
        """Make the cloud's tags exactly the `tags` input (a tag added in the console goes)."""
        upsert, remove = tag_changes(self.read(client, ident, answer), inputs)
        which: Any = [ident] if self.listed else ident
        if remove:
            keys: Any = [{self.key_item: k} for k in remove] if self.key_item else remove
            keys = {self.wrapped: keys} if self.wrapped else keys
            self._call(client, self.untag_call, which, **{self.keys: keys})
        if upsert:
            self._call(client, self.tag_call, which, **{self.field: self.wire(upsert)})


KEY_VALUE = ("Key", "Value")  # the tag items most services use
LOWER_KEY_VALUE = ("key", "value")
EC2_TAGGING = Tagging(
    "describe_tags",
    "create_tags",
    "delete_tags",
    key="Resources",
    by="id",
    field="Tags",
    keys="Tags",
    item=KEY_VALUE,
    described="Tags",
    listed=True,
    key_item="Key",
)

# RDS's tag calls by the resource's ARN; ElastiCache has the very same ones.
RDS_TAGGING = Tagging(
    "list_tags_for_resource",
    "add_tags_to_resource",
    "remove_tags_from_resource",
    key="ResourceName",
    field="Tags",
    keys="TagKeys",
    item=KEY_VALUE,
    answer="TagList",
)

# ECS's tag calls by the resource's ARN; ECS alone spells tag keys in lower case.
ECS_TAGGING = Tagging(
    "list_tags_for_resource",
    "tag_resource",
    "untag_resource",
    key="resourceArn",
    item=LOWER_KEY_VALUE,
    described="tags",
)


def _no_observed(answer: Answer, state: Props) -> Props:
    return {}


@dataclass(frozen=True)
class Shape:
    """One resource type's AWS calls in the shared shape (see the module docstring).

    Attributes:
        token: the Pulumi type token.
        service: the boto3 client's name ("sqs", "apigateway").
        inputs: the inputs the type serves; any other set input is refused by name.
        create: makes the resource (tags included where the create call takes them) and returns
            its id, or its id and the outputs only the create's answer tells (a secret told
            once). Gets the client, the inputs and the context.
        describe: the resource as AWS tells it, from its id (and the state, for ids that do not
            say everything); None or one of the `gone` codes: it is not there.
        gone: AWS's error codes that mean "not there".
        outputs: the computed outputs from what `describe` answered.
        observed: the inputs as the cloud has them (for drift), from what `describe` answered
            and the state.
        delete: removes it; one of the `gone` codes is no error.
        update: changes `changed` inputs in place; None: every input but tags replaces.
        tagging: the tag calls, or None when the type has no tags.
        tags_after_create: the create call takes no tags, so they are set right after it.
        computed: the outputs only the cloud knows (unknown in a preview); `tagsAll` is added.
    """

    token: str
    service: str
    inputs: Collection[str]
    create: CreateCall
    describe: DescribeCall
    outputs: OutputsOf
    delete: DeleteCall
    gone: tuple[str, ...] = ()
    observed: ObservedOf = _no_observed
    update: UpdateCall | None = None
    tagging: Tagging | None = None
    tags_after_create: bool = False
    computed: tuple[str, ...] = ()

    def type(self, **declared: Any) -> ResourceType:
        """The registry entry; `declared` are `ResourceType`'s other fields (force_new, ...).

        With no `update`, every served input but tags forces a replacement; with `tagging`,
        `tags` is a drift input and `tagsAll` a computed output.
        """
        force_new = set(declared.pop("force_new", ())) | {"region"}
        if self.update is None:
            force_new |= set(self.inputs) - {"tags"}
        computed = self.computed
        drift = set(declared.pop("drift_inputs", ()))
        if self.tagging is not None:
            computed = (*computed, "tagsAll") if "tagsAll" not in computed else computed
            drift.add("tags")
        has_update = self.update is not None or self.tagging is not None
        return ResourceType(
            token=self.token,
            create=self._create,
            read=self._read,
            update=self._update if has_update else None,
            delete=self._delete,
            force_new=frozenset(force_new),
            computed=computed,
            drift_inputs=frozenset(drift),
            served_inputs=frozenset(self.inputs),
            **declared,
        )

    # -- the four calls, the same for every shape --

    def _client(self, ctx: CloudContext) -> Any:
        return ctx.client(self.service)

    def _answer(self, ctx: CloudContext, id: str, state: Props) -> Answer | None:
        client = self._client(ctx)
        answer: Answer | None = found(self.gone, lambda: self.describe(client, id, state))
        return answer

    def _tag_key(self, id: str, known: Mapping[str, Any]) -> str:
        assert self.tagging is not None
        return id if self.tagging.by == "id" else str(known.get(self.tagging.by) or id)

    def _create(self, ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
        refuse_unserved(ctx, self.token, inputs, self.inputs)
        made = self.create(self._client(ctx), inputs, ctx)
        id, told = made if isinstance(made, tuple) else (made, {})
        answer = self._answer(ctx, id, inputs)
        if answer is None:
            raise RuntimeError(f"{self.token} {id}: created, but AWS does not describe it")
        outputs = {**told, **self.outputs(answer, ctx)}
        if self.tagging is not None:
            if self.tags_after_create and input_tags(inputs):
                known = {**inputs, **outputs}
                self.tagging.sync(self._client(ctx), self._tag_key(id, known), inputs, answer)
            outputs["tagsAll"] = input_tags(inputs)
        return id, outputs

    def _read(self, ctx: CloudContext, id: str, state: Props) -> Props | None:
        answer = self._answer(ctx, id, state)
        if answer is None:
            return None
        outputs = self.outputs(answer, ctx)
        read = {**observe(state, self.observed(answer, state)), **outputs}
        if self.tagging is not None:
            key = self._tag_key(id, {**state, **outputs})
            tags = self.tagging.read(self._client(ctx), key, answer)
            read.update(tag_outputs(state, tags))
        return read

    def _update(
        self, ctx: CloudContext, id: str, state: Props, inputs: Props, changed: frozenset[str]
    ) -> Props:
        refuse_unserved(ctx, self.token, inputs, self.inputs)
        client = self._client(ctx)
        if self.update is not None and changed - {"tags", "tagsAll"}:
            self.update(client, id, state, inputs, changed)
        answer = self._answer(ctx, id, {**state, **inputs})
        outputs = self.outputs(answer, ctx) if answer is not None else {}
        if self.tagging is not None:
            key = self._tag_key(id, {**state, **inputs, **outputs})
            self.tagging.sync(client, key, inputs, answer)
            outputs["tagsAll"] = input_tags(inputs)
        return {**kept(state, self.computed), **outputs}

    def _delete(self, ctx: CloudContext, id: str, state: Props) -> None:
        with unless_gone(self.gone):
            self.delete(self._client(ctx), id, state)
