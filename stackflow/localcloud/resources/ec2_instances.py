"""EC2 instances and key pairs of the local cloud's aws provider, and `getAmi` (moto's own image
catalogue). An instance runs nowhere: nothing boots, no SSH answers. Ids follow pulumi-aws: an
instance's id is its instance id, a key pair's its name."""

from __future__ import annotations

import base64
import re
from typing import TYPE_CHECKING, Any

from stackflow.localcloud.registry import Props, Registry
from stackflow.localcloud.resources._declared import EC2_TAGGING, Answer, Shape
from stackflow.localcloud.resources._shared import input_tags, same_members

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

INSTANCE = "aws:ec2/instance:Instance"
KEY_PAIR = "aws:ec2/keyPair:KeyPair"
GET_AMI = "aws:ec2/getAmi:getAmi"
_GONE = ("InvalidInstanceID.NotFound", "InvalidKeyPair.NotFound")


def _tag_spec(kind: str, inputs: Props) -> list[dict[str, Any]]:
    tags = input_tags(inputs)
    return [{"ResourceType": kind, "Tags": EC2_TAGGING.wire(tags)}] if tags else []


def _user_data(inputs: Props) -> str | None:
    if inputs.get("userDataBase64"):
        return base64.b64decode(str(inputs["userDataBase64"])).decode()
    return str(inputs["userData"]) if inputs.get("userData") else None


def _instance_create(ec2: Any, inputs: Props, ctx: CloudContext) -> str:
    kwargs: dict[str, Any] = {
        "ImageId": str(inputs["ami"]),
        "InstanceType": str(inputs["instanceType"]),
        "MinCount": 1,
        "MaxCount": 1,
        "TagSpecifications": _tag_spec("instance", inputs),
    }
    for key, api in (("keyName", "KeyName"), ("privateIp", "PrivateIpAddress")):
        if inputs.get(key):
            kwargs[api] = str(inputs[key])
    if inputs.get("availabilityZone"):
        kwargs["Placement"] = {"AvailabilityZone": str(inputs["availabilityZone"])}
    if inputs.get("iamInstanceProfile"):
        kwargs["IamInstanceProfile"] = {"Name": str(inputs["iamInstanceProfile"])}
    if _user_data(inputs) is not None:
        kwargs["UserData"] = _user_data(inputs)
    groups = [str(g) for g in inputs.get("vpcSecurityGroupIds") or []]
    if inputs.get("associatePublicIpAddress") is not None and inputs.get("subnetId"):
        kwargs["NetworkInterfaces"] = [
            {
                "DeviceIndex": 0,
                "SubnetId": str(inputs["subnetId"]),
                "AssociatePublicIpAddress": bool(inputs["associatePublicIpAddress"]),
                **({"Groups": groups} if groups else {}),
            }
        ]
    else:
        if inputs.get("subnetId"):
            kwargs["SubnetId"] = str(inputs["subnetId"])
        if groups:
            kwargs["SecurityGroupIds"] = groups
        if inputs.get("securityGroups"):
            kwargs["SecurityGroups"] = [str(g) for g in inputs["securityGroups"]]
    return str(ec2.run_instances(**kwargs)["Instances"][0]["InstanceId"])


def _instance_describe(ec2: Any, instance_id: str, state: Props) -> Answer | None:
    reservations = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
    found = [i for r in reservations for i in r["Instances"]]
    if not found or found[0]["State"]["Name"] in ("terminated", "shutting-down"):
        return None  # as pulumi-aws reads it: a terminated instance is gone
    return dict(found[0])


def _instance_outputs(instance: Answer, ctx: CloudContext) -> Props:
    return {
        "arn": f"arn:aws:ec2:{ctx.region}:{ctx.account_id}:instance/{instance['InstanceId']}",
        "instanceState": instance["State"]["Name"],
        "privateIp": instance.get("PrivateIpAddress", ""),
        "privateDns": instance.get("PrivateDnsName", ""),
        "publicIp": instance.get("PublicIpAddress", ""),
        "publicDns": instance.get("PublicDnsName", ""),
        "primaryNetworkInterfaceId": next(
            (n["NetworkInterfaceId"] for n in instance.get("NetworkInterfaces", [])), ""
        ),
        "outpostArn": "",
        "passwordData": "",
    }


def _instance_observed(instance: Answer, state: Props) -> Props:
    groups = [g["GroupId"] for g in instance.get("SecurityGroups", [])]
    return {
        "ami": instance.get("ImageId"),
        "instanceType": instance.get("InstanceType"),
        "keyName": instance.get("KeyName", ""),
        "subnetId": instance.get("SubnetId", ""),
        "availabilityZone": (instance.get("Placement") or {}).get("AvailabilityZone"),
        "vpcSecurityGroupIds": same_members(groups, state.get("vpcSecurityGroupIds")),
    }


def _instance_update(
    ec2: Any, id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> None:
    if "vpcSecurityGroupIds" in changed and inputs.get("vpcSecurityGroupIds"):
        ec2.modify_instance_attribute(
            InstanceId=id, Groups=[str(g) for g in inputs["vpcSecurityGroupIds"]]
        )
    if "instanceType" in changed:  # as pulumi-aws: stop, change, start
        ec2.stop_instances(InstanceIds=[id])
        ec2.modify_instance_attribute(
            InstanceId=id, InstanceType={"Value": str(inputs["instanceType"])}
        )
        ec2.start_instances(InstanceIds=[id])


INSTANCE_SHAPE = Shape(
    token=INSTANCE,
    service="ec2",
    inputs=(
        "ami",
        "instanceType",
        "subnetId",
        "vpcSecurityGroupIds",
        "securityGroups",
        "keyName",
        "iamInstanceProfile",
        "userData",
        "userDataBase64",
        "userDataReplaceOnChange",
        "associatePublicIpAddress",
        "availabilityZone",
        "privateIp",
        "sourceDestCheck",
        "disableApiTermination",
        "monitoring",
        "getPasswordData",
        "tags",
    ),
    create=_instance_create,
    describe=_instance_describe,
    gone=_GONE,
    outputs=_instance_outputs,
    observed=_instance_observed,
    update=_instance_update,
    delete=lambda ec2, id, state: ec2.terminate_instances(InstanceIds=[id]),
    tagging=EC2_TAGGING,
    computed=(
        "arn",
        "instanceState",
        "privateIp",
        "privateDns",
        "publicIp",
        "publicDns",
        "primaryNetworkInterfaceId",
        "outpostArn",
        "passwordData",
        "availabilityZone",
        "subnetId",
    ),
)


def _key_create(ec2: Any, inputs: Props, ctx: CloudContext) -> str:
    ec2.import_key_pair(
        KeyName=str(inputs["keyName"]),
        PublicKeyMaterial=str(inputs["publicKey"]).encode(),
        TagSpecifications=_tag_spec("key-pair", inputs),
    )
    return str(inputs["keyName"])


def _key_describe(ec2: Any, name: str, state: Props) -> Answer | None:
    pairs = ec2.describe_key_pairs(KeyNames=[name])["KeyPairs"]
    return dict(pairs[0]) if pairs else None


KEY_PAIR_SHAPE = Shape(
    token=KEY_PAIR,
    service="ec2",
    inputs=("keyName", "keyNamePrefix", "publicKey", "tags"),
    create=_key_create,
    describe=_key_describe,
    gone=_GONE,
    outputs=lambda pair, ctx: {
        "arn": f"arn:aws:ec2:{ctx.region}:{ctx.account_id}:key-pair/{pair['KeyName']}",
        "fingerprint": pair.get("KeyFingerprint", ""),
        "keyPairId": pair.get("KeyPairId", ""),
        "keyType": pair.get("KeyType", "rsa"),
    },
    observed=lambda pair, state: {"keyName": pair["KeyName"]},
    delete=lambda ec2, name, state: ec2.delete_key_pair(KeyName=name),
    tagging=EC2_TAGGING,
    computed=("arn", "fingerprint", "keyPairId", "keyType"),
)


def get_ami(ctx: CloudContext, args: Props) -> Props:
    """aws:ec2/getAmi: the image that matches (the newest with `mostRecent`), in pulumi-aws's
    result shape.

    Raises:
        ValueError: no image matches, or several do without `mostRecent` (pulumi-aws's words).
    """
    kwargs: dict[str, Any] = {}
    if args.get("owners"):
        kwargs["Owners"] = [str(o) for o in args["owners"]]
    if args.get("filters"):
        kwargs["Filters"] = [
            {"Name": str(f["name"]), "Values": [str(v) for v in f["values"]]}
            for f in args["filters"]
        ]
    if args.get("executableUsers"):
        kwargs["ExecutableUsers"] = [str(u) for u in args["executableUsers"]]
    images = ctx.client("ec2").describe_images(**kwargs)["Images"]
    if args.get("nameRegex"):
        pattern = re.compile(str(args["nameRegex"]))
        images = [i for i in images if pattern.search(i.get("Name", ""))]
    if not images:
        raise ValueError(
            "Your query returned no results. Please change your search criteria and try again."
        )
    if len(images) > 1 and not args.get("mostRecent"):
        raise ValueError(
            "Your query returned more than one result. Please try a more specific search "
            "criteria, or set `most_recent` attribute to true."
        )
    image = max(images, key=lambda i: (str(i.get("CreationDate", "")), str(i["ImageId"])))
    return {
        **{k: v for k, v in args.items() if v is not None},
        "id": image["ImageId"],
        "imageId": image["ImageId"],
        "arn": f"arn:aws:ec2:{ctx.region}::image/{image['ImageId']}",
        "name": image.get("Name", ""),
        "description": image.get("Description", ""),
        "architecture": image.get("Architecture", ""),
        "ownerId": image.get("OwnerId", ""),
        "imageOwnerAlias": image.get("ImageOwnerAlias", ""),
        "creationDate": image.get("CreationDate", ""),
        "rootDeviceName": image.get("RootDeviceName", ""),
        "rootDeviceType": image.get("RootDeviceType", ""),
        "virtualizationType": image.get("VirtualizationType", ""),
        "hypervisor": image.get("Hypervisor", ""),
        "imageType": image.get("ImageType", "machine"),
        "platform": image.get("Platform", ""),
        "platformDetails": image.get("PlatformDetails", ""),
        "public": bool(image.get("Public")),
        "state": image.get("State", "available"),
        "enaSupport": bool(image.get("EnaSupport")),
        "imageLocation": image.get("ImageLocation", ""),
        "tags": {t["Key"]: t["Value"] for t in image.get("Tags", [])},
        "rootSnapshotId": next(
            (
                b.get("Ebs", {}).get("SnapshotId", "")
                for b in image.get("BlockDeviceMappings", [])
                if b.get("DeviceName") == image.get("RootDeviceName")
            ),
            "",
        ),
    }


def register(aws: Registry) -> None:
    """Add the EC2 instance and key pair types and getAmi."""
    aws.add(
        INSTANCE_SHAPE.type(
            force_new={
                "ami",
                "subnetId",
                "keyName",
                "availabilityZone",
                "privateIp",
                "associatePublicIpAddress",
                "securityGroups",
                "userData",
                "userDataBase64",
                "iamInstanceProfile",
            },
            defaults={"getPasswordData": False, "userDataReplaceOnChange": False},
        ),
        KEY_PAIR_SHAPE.type(auto_name="keyName", name_prefix="keyNamePrefix", auto_name_max=255),
    )
    aws.function(GET_AMI)(get_ami)
