import setuptools

setuptools.setup(setup_requires=["pbr>=5.5.0"], pbr=True)
