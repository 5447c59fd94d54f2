"""The deployed runtime (``lakeline run``'s default): the CDK app synthesized, deployed on a local AWS
(``local_aws``) and operated as a team operates a deployment."""
