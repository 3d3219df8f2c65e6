def test_other_module():
    assert True
