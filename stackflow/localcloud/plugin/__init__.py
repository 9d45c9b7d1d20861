"""The local cloud's provider plugins: Pulumi's provider protocol served over gRPC, generically.

packages    the packages served (aws, random) and the variable naming the cloud's URL
serve       `python -m stackflow.localcloud.plugin aws`: the plugin process
servicer    the gRPC servicer: Check / Diff / Create / Read / Update / Delete / Invoke
rules       diffs, replacements and auto-names, the same for every type
faults      the knobs' latency and faults, applied to one call
awserrors   AWS's refusals in pulumi-aws's words
"""

from __future__ import annotations

from stackflow.localcloud.errors import FaultInjected
from stackflow.localcloud.plugin.awserrors import aws_error_text
from stackflow.localcloud.plugin.packages import DEFAULT_REGION, ENDPOINT_ENV, PACKAGES
from stackflow.localcloud.plugin.rules import diff_inputs

__all__ = [
    "DEFAULT_REGION",
    "ENDPOINT_ENV",
    "PACKAGES",
    "FaultInjected",
    "aws_error_text",
    "diff_inputs",
]
