"""The CDK app's stacks: stateful storage apart from stateless compute."""
