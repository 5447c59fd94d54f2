"""The deployed system rehearsed on one machine (#20): the synthesized CDK app stood up on a local AWS
endpoint. So far: ``deploy`` (the stacks, as CloudFormation creates them) and the fixes moto needs."""
