#!/usr/bin/env python3
"""The Lakeline CDK app. Configuration comes from CDK context (cdk.json or ``-c``), read in
``stacks/app.py`` and passed down as objects; cdk-nag AwsSolutions checks run at every synth.

    cdk deploy --all -c environment=dev -c engine=athena
"""

import aws_cdk as cdk

from stacks.app import build_app

app = cdk.App()
build_app(app)
app.synth()
